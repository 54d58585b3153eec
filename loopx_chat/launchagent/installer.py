"""Install, upgrade, start, stop, remove and inspect the loopx-chat LaunchAgent.

Owns the order of operations that keeps a binding safe: read and check the existing plist
(fail closed, no launchctl call), decide the binding, build the new plist keeping what the
user added, and only then touch launchd and the file. Writes are atomic with mode 0644,
never through a symlink; each replaced file is kept as `<label>.plist.<UTC stamp>.previous`
(the last five, and always the oldest one loopx-chat did not write). It never executes plist
contents: shell startup files are read as text for the binding decoder, never run.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopx_chat.errors import Remedy, UsageError
from loopx_chat.launchagent.binding import (
    InstallBinding,
    LaunchdUser,
    existing_binding,
    resolve_install_binding,
    startup_files_to_read,
)
from loopx_chat.launchagent.launchctl import Launchctl, ServiceState
from loopx_chat.launchagent.legacy import Ambiguous
from loopx_chat.launchagent.plist import (
    APPROVAL_MODES,
    DEFAULT_HOST,
    DEFAULT_PORT,
    NOTIFY_MODES,
    STANDARD_PATH,
    AgentSpec,
    LaunchAgentError,
    ParsedPlist,
    build_plist,
    is_own_plist,
    label_for,
    merge_user_additions,
    parse_plist,
    render_plist,
)
from loopx_chat.launchagent.probe import ServiceProbe, probe_capabilities, service_facts
from loopx_chat.state.location import default_state_dir
from loopx_chat.state.private_files import atomic_write_bytes
from loopx_chat.state.push_options import KEEP, NO_PUSH, PushChoice, PushPlan, push_plan
from loopx_chat.state.push_secrets import PushCheck, keep_push_secrets
from loopx_chat.state.service_runtime import ensure_secret

PLIST_MODE = 0o644
TEST_SWITCH = "LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN"
BACKUPS_KEPT = 5
BACKUP_SUFFIX = ".previous"


def installed_service_argv() -> tuple[tuple[str, ...], str | None]:
    """The argv the plist runs, and a warning when it depends on a source checkout.

    The installed `loopx-chat` console script beside this interpreter (a pipx or uv tool
    install keeps both outside any checkout); `python -m loopx_chat` when there is none."""
    script = Path(sys.executable).parent / "loopx-chat"
    argv: tuple[str, ...] = (
        (str(script.absolute()),) if script.is_file() else (sys.executable, "-m", "loopx_chat")
    )
    return argv, _editable_warning()


def _editable_warning() -> str | None:
    """A warning when the running package is not an installed copy but a source checkout (an
    editable install, or PYTHONPATH): the service would stop working if that checkout moved."""
    package = Path(__file__).resolve().parents[1]
    installed = Path(sysconfig.get_paths()["purelib"]).resolve()
    if installed in package.parents:
        return None
    return (
        f"loopx-chat runs from a source checkout ({package.parent}), an editable install: the "
        "service stops working if that checkout moves or `make clean` removes its .venv. For "
        "a lasting service install the package with `pipx install <path or wheel>` or "
        "`uv tool install <path or wheel>` and run `loopx-chat service install` from there"
    )


def codex_at_install(
    requested: str | None, kept: str | None, environ: Mapping[str, str], warnings: list[str]
) -> str | None:
    """The absolute codex a service runs: the one asked for (`--codex-bin`), else the one
    the installed service runs (`kept`, when absolute), else `codex` on PATH at install time;
    none found is a warning. Shared by the LaunchAgent and the systemd service."""
    if requested is None and kept and os.path.isabs(kept):
        return kept
    found = shutil.which(requested or "codex", path=environ.get("PATH", os.defpath))
    if found is None:
        warnings.append(
            f"codex ({requested or 'codex'}) was not found at install time; the service "
            "will report host_tool_unavailable until LOOPX_CHAT_CODEX_BIN names it"
        )
        return None
    return str(Path(found).absolute())


@dataclass(frozen=True)
class InstallerContext:
    """What the installer needs from the outside world, captured once."""

    environ: Mapping[str, str]
    user_home: str
    uid: int
    platform: str = sys.platform
    state_dir: str | None = None  # explicit --state-dir / LOOPX_CHAT_STATE_DIR, if any
    codex_bin: str | None = None  # explicit --codex-bin / LOOPX_CHAT_CODEX_BIN, if any
    service_argv: tuple[str, ...] = (sys.executable, "-m", "loopx_chat")
    service_warning: str | None = None
    user_name: str | None = None
    login_shell: str | None = None

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str], *, state_dir: str | None, codex_bin: str | None
    ) -> InstallerContext:
        home = environ.get("HOME") or str(Path.home())
        uid = os.getuid()
        try:
            entry = pwd.getpwuid(uid)
            user_name, login_shell = entry.pw_name, entry.pw_shell
        except KeyError:
            user_name, login_shell = None, None
        argv, warning = installed_service_argv()
        return cls(
            environ=dict(environ),
            user_home=home,
            uid=uid,
            state_dir=state_dir or environ.get("LOOPX_CHAT_STATE_DIR") or None,
            codex_bin=codex_bin or environ.get("LOOPX_CHAT_CODEX_BIN") or None,
            service_argv=argv,
            service_warning=warning,
            user_name=user_name,
            login_shell=login_shell,
        )

    @property
    def launchd_user(self) -> LaunchdUser:
        return LaunchdUser(home=self.user_home, name=self.user_name, shell=self.login_shell)


@dataclass(frozen=True)
class AgentPaths:
    label: str
    plist: Path
    log_dir: Path
    stdout_log: Path
    stderr_log: Path

    @classmethod
    def for_context(cls, ctx: InstallerContext) -> AgentPaths:
        label = label_for(ctx.environ.get("LOOPX_LAUNCH_LABEL_PREFIX") or None)
        agents = Path(ctx.user_home) / "Library" / "LaunchAgents"
        logs = Path(ctx.user_home) / "Library" / "Logs" / "loopx"
        return cls(
            label=label,
            plist=agents / f"{label}.plist",
            log_dir=logs,
            stdout_log=logs / "chat.out.log",
            stderr_log=logs / "chat.err.log",
        )


@dataclass
class Report:
    action: str
    label: str
    plist_path: str
    state: str = "not_installed"
    pid: int | None = None
    last_exit_code: int | None = None
    binding: dict[str, str] | None = None
    binding_changed: dict[str, str] | None = None
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    port: int = DEFAULT_PORT
    service: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        doc = dict(self.__dict__)
        return {"ok": True, **doc, "url": f"http://{DEFAULT_HOST}:{self.port}/"}


def classify(installed: bool, state: ServiceState) -> str:
    if not installed:
        return "loaded_without_plist" if state.loaded else "not_installed"
    if not state.loaded:
        return "installed_not_loaded"
    return "running" if state.running else "loaded_not_running"


class LaunchAgentInstaller:
    def __init__(
        self,
        ctx: InstallerContext,
        launchctl_factory: Callable[[], Launchctl],
        probe: Callable[[Path], ServiceProbe] = probe_capabilities,
    ) -> None:
        if ctx.platform != "darwin" and ctx.environ.get(TEST_SWITCH) != "1":
            raise LaunchAgentError(
                "LaunchAgents exist only on macOS",
                error_code="platform_unsupported",
                remedy=Remedy(
                    summary="This command manages a macOS LaunchAgent.",
                    next_action="On Linux run `loopx-chat service install` (a systemd user "
                    "service); elsewhere run `loopx-chat serve` directly "
                    f"({TEST_SWITCH}=1 is only for tests with a fake launchctl).",
                ),
            )
        self.ctx = ctx
        self.paths = AgentPaths.for_context(ctx)
        self._launchctl_factory = launchctl_factory
        self._launchctl: Launchctl | None = None
        self._probe = probe

    @property
    def launchctl(self) -> Launchctl:
        if self._launchctl is None:
            self._launchctl = self._launchctl_factory()
        return self._launchctl

    # -- reading what is there -----------------------------------------------------------
    def read_existing(self) -> tuple[bytes, ParsedPlist] | None:
        path = self.paths.plist
        if path.is_symlink():
            raise LaunchAgentError(
                f"{path} is a symlink; loopx-chat never writes through one. Replace it with "
                "a regular file or remove it, then install again",
                error_code="plist_unsafe",
            )
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LaunchAgentError(
                f"cannot read {path}: {exc.strerror}", error_code="plist_unreadable"
            ) from None
        return raw, parse_plist(raw, where=str(path))

    def startup_text(self, existing: ParsedPlist | None) -> dict[str, str | None]:
        """The text of every shell startup file the existing plist's shell would read (None:
        no such file). Read as text for the decoder; never run."""
        if existing is None:
            return {}
        found: dict[str, str | None] = {}
        for name in startup_files_to_read(existing, self.ctx.launchd_user):
            try:
                found[name] = Path(name).read_bytes().decode("utf-8", errors="replace")
            except (FileNotFoundError, NotADirectoryError):
                found[name] = None
            except OSError as exc:
                raise Ambiguous(
                    "startup_file_unreadable",
                    f"the shell would read {name}, which cannot be read here ({exc.strerror})",
                ) from None
        return found

    # -- building ------------------------------------------------------------------------
    def _codex_bin(self, existing: ParsedPlist | None, warnings: list[str]) -> str | None:
        kept = existing.environment.get("LOOPX_CHAT_CODEX_BIN") if existing else None
        return codex_at_install(self.ctx.codex_bin, kept, self.ctx.environ, warnings)

    def build(
        self,
        binding: InstallBinding,
        existing: ParsedPlist | None,
        port: int,
        warnings: list[str],
        *,
        notify: str | None = None,
        notify_url: str | None = None,
        approval: str | None = None,
        public_url: str | None = None,
        push: PushPlan = NO_PUSH,
    ) -> tuple[bytes, list[str], list[str]]:
        """(plist bytes, keys kept from the user's plist, keys dropped from a foreign one).

        `notify` / `notify_url` / `approval` not given keep what the installed plist says
        (desktop when it says nothing usable; no `--approval`, the service's `never`);
        `push` was decided already (`push_plan`: names only, never a secret)."""
        if notify is None and existing is not None:
            notify = existing.option("--notify")
        if notify not in NOTIFY_MODES:
            notify = "desktop"
        if notify_url is None and existing is not None:
            notify_url = existing.option("--notify-url")
        if notify in ("webhook", "both") and not notify_url:
            # `serve` refuses this at every start: a plist saying it would crash-loop.
            raise UsageError(
                f"--notify {notify} needs --notify-url URL (none given, and the installed "
                "plist names none); nothing was changed",
                error_code="usage_error",
            )
        notify_args = ("--notify", notify) + (("--notify-url", notify_url) if notify_url else ())
        if approval is None and existing is not None:
            approval = existing.option("--approval")
        if approval not in APPROVAL_MODES or approval == "never":
            approval = None  # the service's own default: the plist need not say it
        approval_args = ("--approval", approval) if approval else ()
        if public_url is None and existing is not None:
            public_url = existing.option("--public-url")
        public_args = ("--public-url", public_url) if public_url else ()
        path_parts: list[str] = []
        codex_bin = self._codex_bin(existing, warnings)
        if codex_bin:
            path_parts.append(str(Path(codex_bin).parent))
        path_parts += [p for p in STANDARD_PATH if p not in path_parts]
        env = {"LOOPX_CHAT_CODEX_HOME": binding.path, "PATH": ":".join(path_parts)}
        if codex_bin:
            env["LOOPX_CHAT_CODEX_BIN"] = codex_bin
        if binding.sqlite_home:
            env["CODEX_SQLITE_HOME"] = binding.sqlite_home
        state_dir = self.ctx.state_dir or (
            existing.environment.get("LOOPX_CHAT_STATE_DIR") if existing else None
        )
        if state_dir:
            env["LOOPX_CHAT_STATE_DIR"] = state_dir
        spec = AgentSpec(
            label=self.paths.label,
            program_arguments=(
                *self.ctx.service_argv,
                "serve",
                "--host",
                DEFAULT_HOST,
                "--port",
                str(port),
                *notify_args,
                *approval_args,
                *public_args,
                *push.argv(),
            ),
            environment=env,
            working_directory=self.ctx.user_home,
            stdout_path=str(self.paths.stdout_log),
            stderr_path=str(self.paths.stderr_log),
        )
        plist = build_plist(spec)
        kept: list[str] = []
        dropped: list[str] = []
        if existing is not None:
            plist, kept, dropped = merge_user_additions(
                plist, existing.data, own=is_own_plist(existing)
            )
        data = render_plist(plist)
        parse_plist(data, where="generated plist")  # what we write must read back
        return data, kept, dropped

    # -- commands ------------------------------------------------------------------------
    def install(
        self,
        *,
        explicit_home: str | None,
        port: int | None,
        action: str = "install",
        explicit_source: str = "--codex-home",
        notify: str | None = None,
        notify_url: str | None = None,
        approval: str | None = None,
        public_url: str | None = None,
        push: PushChoice = KEEP,
        check_push: PushCheck | None = None,
    ) -> Report:
        """`push` not given keeps the installed plist's push options; their secrets are
        kept in the state dir (`state/push_secrets.py`), checked by `check_push` first."""
        current = self.read_existing()  # fails closed before any launchctl call
        existing = current[1] if current else None
        plan = push_plan(push, existing.program_arguments if existing else ())
        binding, before = resolve_install_binding(
            explicit=explicit_home,
            existing=existing,
            ambient_codex_home=self.ctx.environ.get("CODEX_HOME") or None,
            user=self.ctx.launchd_user,
            startup_text=self.startup_text(existing),
            ambient_sqlite_home=self.ctx.environ.get("CODEX_SQLITE_HOME") or None,
        )
        warnings: list[str] = []
        if self.ctx.service_warning:
            warnings.append(self.ctx.service_warning)
        if not Path(binding.path).is_dir():
            warnings.append(f"Codex home {binding.path} does not exist yet")
        chosen_port = port or (existing.port() if existing else None) or DEFAULT_PORT
        data, kept, dropped = self.build(
            binding,
            existing,
            chosen_port,
            warnings,
            notify=notify,
            notify_url=notify_url,
            approval=approval,
            public_url=public_url,
            push=plan,
        )
        moved = keep_push_secrets(
            self.service_state_dir(existing),
            plan,
            self.ctx.environ,
            check_push,
            in_definition=existing.environment if existing else {},
        )
        # The owner's secret before launchd starts the service: one others could read refuses
        # the install here, before anything changes.
        ensure_secret(self.service_state_dir(existing))
        unchanged = current is not None and current[0] == data
        state = self.launchctl.state(self.paths.label)
        backup: Path | None = None
        if unchanged and state.loaded:
            # Same definition: a restart picks up an upgraded package.
            self.launchctl.kickstart(self.paths.label)
        elif unchanged:
            self.launchctl.bootstrap(self.paths.label, str(self.paths.plist))
        else:
            previous = current[0] if current else None
            # The file first: a write that fails leaves the running job as it was. launchd
            # works from the copy it loaded, so replacing the file changes nothing until
            # the reload below.
            backup = self._write(data, previous=previous)
            try:
                self.launchctl.bootout(self.paths.label, str(self.paths.plist))
                self.launchctl.bootstrap(self.paths.label, str(self.paths.plist))
            except LaunchAgentError:
                # Whether the old job is still loaded (bootout failed) or gone (bootstrap
                # failed), the file on disk must again say what launchd should run.
                if previous is not None:
                    self._restore(previous)
                raise
        report = self.status(action=action)
        report.warnings[:0] = warnings
        report.binding = {"path": binding.path, "source": binding.source}
        if binding.sqlite_home:
            report.binding["sqlite_home"] = binding.sqlite_home
        if before is not None and before.path != binding.path:
            report.binding_changed = {
                "from": before.path,
                "to": binding.path,
                "source": explicit_source if explicit_home else binding.source,
            }
        report.kept, report.dropped = kept, dropped
        report.notes += moved
        if backup is not None:
            report.notes.append(f"previous plist kept at {backup}")
        return report

    def _installed_binding(self, existing: ParsedPlist) -> tuple[dict[str, str] | None, str]:
        """What the installed agent's service starts with: the very decision an upgrade makes."""
        try:
            found = existing_binding(existing, self.ctx.launchd_user, self.startup_text(existing))
        except LaunchAgentError as exc:
            return None, (
                f"the installed plist's Codex home cannot be decided ({exc.error_code}: "
                f"{exc.message})"
            )
        binding = {"path": found.path, "source": found.source.replace("existing plist", "plist")}
        if found.sqlite_home:
            binding["sqlite_home"] = found.sqlite_home
        if found.legacy:
            return binding, "an older plist: `launchagent install` rewrites it, keeping this home"
        return binding, ""

    def _restore(self, previous: bytes) -> None:
        """Put the old plist back and load it again after a failed reload of the new one, so a
        failed upgrade leaves the service that was running (best effort: the reload error is
        what the user sees; a job still loaded refuses the bootstrap, which is fine)."""
        try:
            atomic_write_bytes(self.paths.plist, previous, mode=PLIST_MODE)
            self.launchctl.bootstrap(self.paths.label, str(self.paths.plist))
        except (OSError, LaunchAgentError):
            pass

    def backups(self) -> list[Path]:
        """Kept previous plists, oldest first (the UTC stamp in the name sorts by time)."""
        folder = self.paths.plist.parent
        prefix = self.paths.plist.name + "."
        try:
            names = [
                p
                for p in folder.iterdir()
                if p.name.startswith(prefix) and p.name.endswith(BACKUP_SUFFIX)
            ]
        except OSError:
            return []
        return sorted(names, key=lambda p: p.name)

    def _write(self, data: bytes, previous: bytes | None) -> Path | None:
        backup: Path | None = None
        try:
            self.paths.plist.parent.mkdir(parents=True, exist_ok=True)
            self.paths.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if previous is not None and previous != data:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                backup = self.paths.plist.with_name(
                    f"{self.paths.plist.name}.{stamp}{BACKUP_SUFFIX}"
                )
                n = 1
                while backup.exists():  # two installs in one second keep both
                    backup = backup.with_name(f"{self.paths.plist.name}.{stamp}-{n}{BACKUP_SUFFIX}")
                    n += 1
                atomic_write_bytes(backup, previous, mode=PLIST_MODE)
            atomic_write_bytes(self.paths.plist, data, mode=PLIST_MODE)
        except OSError as exc:
            raise LaunchAgentError(
                f"cannot write {self.paths.plist} or its log folder {self.paths.log_dir}: "
                f"{exc.strerror or exc}",
                error_code="plist_unwritable",
            ) from None
        self._prune_backups()
        return backup

    def _prune_backups(self) -> None:
        """Keep the newest BACKUPS_KEPT, and the oldest one loopx-chat did not write (the
        user's original plist) whatever its age."""
        backups = self.backups()
        original: Path | None = None
        for path in backups:
            try:
                if not is_own_plist(parse_plist(path.read_bytes(), where=str(path))):
                    original = path
                    break
            except (OSError, LaunchAgentError):
                original = path  # unreadable as ours: keep it, it is not ours to delete
                break
        for path in backups[: max(0, len(backups) - BACKUPS_KEPT)]:
            if path != original:
                with contextlib.suppress(OSError):
                    path.unlink()

    def uninstall(self) -> Report:
        path = self.paths.plist
        if path.is_symlink() or (path.exists() and not path.is_file()):
            # Checked before launchd is touched: a refusal leaves the service as it was.
            raise LaunchAgentError(
                f"{path} is not a regular file; remove it by hand", error_code="plist_unsafe"
            )
        self.launchctl.bootout(self.paths.label, str(path) if path.exists() else None)
        removed = False
        try:
            path.unlink()
            removed = True
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise LaunchAgentError(
                f"the service was stopped but {path} could not be removed: {exc.strerror or exc}",
                error_code="plist_unwritable",
            ) from None
        report = self.status(action="uninstall")
        report.notes.append(
            ("removed " if removed else "no plist at ") + f"{self.paths.plist}; "
            f"logs in {self.paths.log_dir} and loopx-chat state were left in place"
        )
        return report

    def start(self) -> Report:
        if self.read_existing() is None:
            raise LaunchAgentError(
                "the LaunchAgent is not installed",
                error_code="not_installed",
                remedy=Remedy(
                    summary="Nothing to start.", next_action="Run `loopx-chat launchagent install`."
                ),
            )
        state = self.launchctl.state(self.paths.label)
        if not state.loaded:
            self.launchctl.bootstrap(self.paths.label, str(self.paths.plist))
        elif not state.running:
            self.launchctl.kickstart(self.paths.label)
        return self.status(action="start")

    def stop(self) -> Report:
        current = self.read_existing()  # a bad plist is refused before launchd is touched
        if current is None and not self.launchctl.state(self.paths.label).loaded:
            raise LaunchAgentError(
                "the LaunchAgent is not installed",
                error_code="not_installed",
                remedy=Remedy(
                    summary="Nothing to stop.", next_action="Run `loopx-chat launchagent install`."
                ),
            )
        self.launchctl.bootout(self.paths.label, str(self.paths.plist) if current else None)
        report = self.status(action="stop")
        report.notes.append("stopped until the next `start`, `install` or login")
        return report

    def service_state_dir(self, existing: ParsedPlist | None) -> Path:
        """Where the agent's service keeps its state (and the owner's secret)."""
        named = self.ctx.state_dir or (
            existing.environment.get("LOOPX_CHAT_STATE_DIR") if existing else None
        )
        return Path(named) if named else default_state_dir(self.ctx.environ)

    def restart(self, *, port: int | None = None) -> Report:
        return self.install(explicit_home=None, port=port, action="restart")

    def status(self, action: str = "status") -> Report:
        current = self.read_existing()
        state = self.launchctl.state(self.paths.label)
        existing = current[1] if current else None
        port = (existing.port() if existing else None) or DEFAULT_PORT
        report = Report(
            action=action,
            label=self.paths.label,
            plist_path=str(self.paths.plist),
            state=classify(current is not None, state),
            pid=state.pid,
            last_exit_code=state.last_exit_code,
            port=port,
            logs={"stdout": str(self.paths.stdout_log), "stderr": str(self.paths.stderr_log)},
        )
        if existing is not None:
            report.binding, warning = self._installed_binding(existing)
            if warning:
                report.warnings.append(warning)
        if report.state == "loaded_without_plist":
            report.warnings.append("launchd still has the job but its plist is gone")
        if state.running:
            bound = report.binding["path"] if report.binding else None
            report.service, warnings = service_facts(
                self._probe(self.service_state_dir(existing)),
                bound,
                unit="plist",
                restart="loopx-chat launchagent restart",
            )
            report.warnings += warnings
        return report


# `launchagent status` exit codes, for scripts (documented in README and --help).
STATUS_EXIT = {"serving": 0, "not_serving": 3, "not_installed": 4}


def status_exit_code(report: Report) -> int:
    """0: running and answering; 3: installed but not loaded, not running or not answering;
    4: not installed (no plist, even if launchd still holds a job by that label)."""
    if report.state in ("not_installed", "loaded_without_plist"):
        return STATUS_EXIT["not_installed"]
    if report.state == "running" and report.service.get("answering"):
        return STATUS_EXIT["serving"]
    return STATUS_EXIT["not_serving"]


class Described(Protocol):
    """What `report_lines` reads of a report (the LaunchAgent's, or the systemd service's)."""

    binding: dict[str, str] | None
    binding_changed: dict[str, str] | None
    kept: list[str]
    dropped: list[str]
    port: int
    service: dict[str, Any]
    warnings: list[str]
    notes: list[str]


def report_lines(
    report: Described, head: list[str], *, noun: str, logs: str, more: Sequence[str] = ()
) -> list[str]:
    """A status report for a person: `head`, the binding, what an upgrade kept or dropped
    (`noun` names the file), `more`, the page, the service, the logs, warnings and notes."""
    lines = list(head)
    if report.binding:
        lines.append(f"codex home: {report.binding['path']} (from {report.binding['source']})")
    if report.binding_changed:
        changed = report.binding_changed
        lines.append(f"binding changed: {changed['from']} -> {changed['to']} ({changed['source']})")
    if report.kept:
        lines.append(f"kept from your {noun}: {', '.join(report.kept)}")
    if report.dropped:
        lines.append(f"dropped from the old {noun}: {', '.join(report.dropped)}")
    lines += more
    lines.append(f"url:     http://{DEFAULT_HOST}:{report.port}/")
    lines.append("sign in:  loopx-chat open")
    if report.service:
        if report.service["answering"]:
            lines.append(
                f"service: answering, version {report.service['package_version']} "
                f"(installed {report.service['installed_version']}), "
                f"status contract {report.service.get('contract') or 'unknown'}"
            )
        else:
            lines.append(f"service: not answering ({report.service['detail']})")
    lines.append(f"logs:    {logs}")
    lines += [f"warning: {w}" for w in report.warnings]
    lines += [f"note:    {n}" for n in report.notes]
    return lines


def describe(report: Report) -> list[str]:
    """Plain-language lines for a person."""
    words = {
        "not_installed": "not installed",
        "installed_not_loaded": "installed but not loaded",
        "loaded_not_running": "loaded but not running"
        + (
            f" (last exit code {report.last_exit_code})"
            if report.last_exit_code is not None
            else ""
        ),
        "running": f"running (pid {report.pid})",
        "loaded_without_plist": "loaded in launchd but its plist is missing",
    }
    head = [
        f"{report.label}: {words.get(report.state, report.state)}",
        f"plist:   {report.plist_path}",
    ]
    logs = f"{report.logs.get('stdout')} / {report.logs.get('stderr')}"
    return report_lines(report, head, noun="plist", logs=logs)
