"""Install, upgrade, start, stop, remove and inspect the loopx-chat systemd user service.

Owns the order of operations that keeps a binding safe, as the LaunchAgent installer does:
read and check what is on disk (the unit, its socket, drop-ins and environment files; fail
closed, no systemctl call), refuse when there is no user manager, decide the binding, build
both units keeping what the user added, and only then write the files (atomic, 0644, never
through a symlink; a replaced unit kept as `<unit>.<UTC stamp>.previous`) and tell systemd.
A reload that fails puts the previous units back. Drop-ins are read, never written. It never
executes anything a unit says.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopx_chat.errors import Remedy, UsageError
from loopx_chat.state.location import default_state_dir
from loopx_chat.state.private_files import atomic_write_bytes
from loopx_chat.state.push_options import KEEP, NO_PUSH, PushChoice, PushPlan, push_plan
from loopx_chat.state.push_secrets import PushCheck, keep_push_secrets
from loopx_chat.state.service_runtime import ensure_secret
from loopx_chat.systemd.binding import (
    InstalledUnit,
    UnitBinding,
    dropin_order,
    existing_binding,
    resolve_binding,
    service_environment,
)
from loopx_chat.systemd.systemctl import Systemctl, UnitState
from loopx_chat.systemd.unit import (
    APPROVAL_MODES,
    DEFAULT_HOST,
    DEFAULT_PORT,
    DROPIN_DIR,
    NOTIFY_MODES,
    SERVICE_UNIT,
    SOCKET_UNIT,
    ParsedUnit,
    ServiceUnitError,
    UnitSpec,
    Unreadable,
    merge_user_lines,
    parse_unit,
    render_service,
    render_socket,
)

UNIT_MODE = 0o644
BACKUP_SUFFIX = ".previous"
BACKUPS_KEPT = 5


# Who answers on the owner's socket of the service's state dir, and whether it is the
# installed version on the bound home: (state dir, bound home) -> (the report's `service`
# block, warnings). The CLI passes the LaunchAgent's own (`launchagent.probe`), so the two
# reports say the same; no secret is sent (state/owner_socket.py proves who asks).
ServiceFacts = Callable[[Path, str | None], tuple[dict[str, Any], list[str]]]


@dataclass(frozen=True)
class ServiceContext:
    """What the installer needs from the outside world, captured once."""

    environ: Mapping[str, str]
    user_home: str
    service_argv: tuple[str, ...]
    # (asked for, the installed unit's, environ, warnings) -> the absolute codex the service
    # runs; the CLI passes the LaunchAgent's rule (`codex_at_install`), so the two agree.
    find_codex: Callable[[str | None, str | None, Mapping[str, str], list[str]], str | None]
    state_dir: str | None = None  # explicit --state-dir / LOOPX_CHAT_STATE_DIR, if any
    codex_bin: str | None = None  # explicit --codex-bin / LOOPX_CHAT_CODEX_BIN, if any
    service_warning: str | None = None

    @property
    def unit_dir(self) -> Path:
        config = self.environ.get("XDG_CONFIG_HOME") or ""
        base = Path(config) if os.path.isabs(config) else Path(self.user_home) / ".config"
        return base / "systemd" / "user"


@dataclass
class ServiceReport:
    action: str
    unit_path: str
    state: str = "not_installed"
    active: str = "inactive"
    enabled: bool = False
    pid: int | None = None
    last_exit_code: int | None = None
    binding: dict[str, str] | None = None
    binding_changed: dict[str, str] | None = None
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    dropins: list[str] = field(default_factory=list)
    port: int = DEFAULT_PORT
    service: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    logs: str = f"journalctl --user -u {SERVICE_UNIT}"

    def to_dict(self) -> dict[str, Any]:
        doc = dict(self.__dict__)
        return {"ok": True, **doc, "url": f"http://{DEFAULT_HOST}:{self.port}/"}


# `service status` exit codes, the same as `launchagent status` on macOS.
STATUS_EXIT = {"serving": 0, "not_serving": 3, "not_installed": 4}


def status_exit_code(report: ServiceReport) -> int:
    """0: running and answering; 3: installed but not running or not answering; 4: no unit."""
    if report.state in ("not_installed", "active_without_unit"):
        return STATUS_EXIT["not_installed"]
    if report.state == "running" and report.service.get("answering"):
        return STATUS_EXIT["serving"]
    return STATUS_EXIT["not_serving"]


def classify(installed: bool, state: UnitState) -> str:
    if not installed:
        return "active_without_unit" if state.running else "not_installed"
    if state.active == "unknown":
        return "installed_manager_unavailable"
    if state.running:
        return "running"
    return "failed" if state.active == "failed" else "installed_not_running"


def _installed_argv(unit: ParsedUnit) -> tuple[str, ...]:
    """The installed service's argv, or none when it holds what only systemd expands."""
    try:
        return unit.exec_start()
    except Unreadable:
        return ()


class ServiceInstaller:
    def __init__(
        self, ctx: ServiceContext, systemctl_factory: Callable[[], Systemctl], facts: ServiceFacts
    ) -> None:
        self.ctx = ctx
        self.unit_path = ctx.unit_dir / SERVICE_UNIT
        self.socket_path = ctx.unit_dir / SOCKET_UNIT
        self.dropin_dir = ctx.unit_dir / DROPIN_DIR
        self._factory = systemctl_factory
        self._systemctl: Systemctl | None = None
        self._facts = facts

    @property
    def systemctl(self) -> Systemctl:
        if self._systemctl is None:
            self._systemctl = self._factory()
        return self._systemctl

    # -- reading what is there -----------------------------------------------------------
    def _read(self, path: Path) -> str | None:
        if path.is_symlink():
            raise ServiceUnitError(
                f"{path} is a symlink; loopx-chat never writes through one. Replace it with a "
                "regular file or remove it, then install again",
                error_code="unit_unsafe",
            )
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ServiceUnitError(
                f"cannot read {path}: {exc.strerror}", error_code="unit_unreadable"
            ) from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ServiceUnitError(
                f"the systemd unit {path} is not UTF-8; it was left untouched",
                error_code="unit_malformed",
            ) from None

    def _parsed(self, path: Path) -> tuple[str, ParsedUnit] | None:
        text = self._read(path)
        if text is None:
            return None
        return text, parse_unit(text, where=str(path), user_home=self.ctx.user_home)

    def dropins(self) -> list[ParsedUnit]:
        try:
            names = dropin_order([p.name for p in self.dropin_dir.iterdir()])
        except OSError:
            return []
        found = []
        for name in names:
            got = self._parsed(self.dropin_dir / name)
            if got is not None:
                found.append(got[1])
        return found

    def installed(self) -> tuple[str, InstalledUnit] | None:
        got = self._parsed(self.unit_path)
        if got is None:
            return None
        text, unit = got
        dropins = tuple(self.dropins())
        env_files: dict[str, str | None] = {}
        for parsed in (unit, *dropins):
            for name, _optional in parsed.environment_files():
                try:
                    env_files[name] = Path(name).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    env_files[name] = None
        return text, InstalledUnit(unit, dropins, env_files)

    # -- building ------------------------------------------------------------------------
    def build(
        self,
        binding: UnitBinding,
        installed: InstalledUnit | None,
        port: int,
        warnings: list[str],
        *,
        notify: str | None,
        notify_url: str | None,
        approval: str | None,
        public_url: str | None = None,
        push: PushPlan = NO_PUSH,
    ) -> tuple[str, str, list[str], list[str]]:
        """(service text, socket text, kept, dropped); options not given keep the unit's
        (`push` was decided already: `push_plan`, names only, never a secret)."""
        unit = installed.unit if installed else None
        if notify is None and unit is not None:
            notify = unit.option("--notify")
        notify = notify if notify in NOTIFY_MODES else "desktop"
        if notify_url is None and unit is not None:
            notify_url = unit.option("--notify-url")
        if notify in ("webhook", "both") and not notify_url:
            raise UsageError(
                f"--notify {notify} needs --notify-url URL (none given, and the installed "
                "unit names none); nothing was changed",
                error_code="usage_error",
            )
        if approval is None and unit is not None:
            approval = unit.option("--approval")
        approval = approval if approval in APPROVAL_MODES and approval != "never" else None
        if public_url is None and unit is not None:
            public_url = unit.option("--public-url")
        state_dir = self.ctx.state_dir or (
            unit.environment().get("LOOPX_CHAT_STATE_DIR") if unit else None
        )
        spec = UnitSpec(
            argv=(
                *self.ctx.service_argv,
                "serve",
                *("--host", DEFAULT_HOST, "--port", str(port), "--notify", notify),
                *(("--notify-url", notify_url) if notify_url else ()),
                *(("--approval", approval) if approval else ()),
                *(("--public-url", public_url) if public_url else ()),
                *push.argv(),
            ),
            environment=service_environment(
                binding,
                self.ctx.find_codex(
                    self.ctx.codex_bin,
                    unit.environment().get("LOOPX_CHAT_CODEX_BIN") if unit else None,
                    self.ctx.environ,
                    warnings,
                ),
                state_dir,
            ),
            working_directory=self.ctx.user_home,
        )
        service, kept, dropped = merge_user_lines(SERVICE_UNIT, render_service(spec), unit)
        old_socket = self._parsed(self.socket_path)
        socket, kept_s, dropped_s = merge_user_lines(
            SOCKET_UNIT, render_socket(port), old_socket[1] if old_socket else None
        )
        # What we write must read back to the same binding.
        check = parse_unit(service, where="generated unit", user_home=self.ctx.user_home)
        back = existing_binding(InstalledUnit(check, (), {}), self.ctx.user_home)
        if back.path != binding.path or check.port() != port:
            raise ServiceUnitError(
                "the generated unit does not read back to its own binding; nothing was changed",
                error_code="unit_malformed",
            )
        kept += [f"{SOCKET_UNIT}:{k}" for k in kept_s]
        dropped += [f"{SOCKET_UNIT}:{k}" for k in dropped_s]
        return service, socket, kept, dropped

    # -- writing -------------------------------------------------------------------------
    def _write(self, path: Path, text: str, previous: str | None) -> Path | None:
        backup: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if previous is not None and previous != text:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                backup = path.with_name(f"{path.name}.{stamp}{BACKUP_SUFFIX}")
                n = 1
                while backup.exists():
                    backup = path.with_name(f"{path.name}.{stamp}-{n}{BACKUP_SUFFIX}")
                    n += 1
                atomic_write_bytes(backup, previous.encode(), mode=UNIT_MODE)
            atomic_write_bytes(path, text.encode(), mode=UNIT_MODE)
        except OSError as exc:
            raise ServiceUnitError(
                f"cannot write {path}: {exc.strerror or exc}", error_code="unit_unwritable"
            ) from None
        self._prune(path)
        return backup

    def _prune(self, path: Path) -> None:
        prefix = path.name + "."
        with contextlib.suppress(OSError):
            olds = sorted(
                p
                for p in path.parent.iterdir()
                if p.name.startswith(prefix) and p.name.endswith(BACKUP_SUFFIX)
            )
            for old in olds[: max(0, len(olds) - BACKUPS_KEPT)]:
                old.unlink()

    def service_state_dir(self, unit: ParsedUnit | None) -> Path:
        named = self.ctx.state_dir or (
            unit.environment().get("LOOPX_CHAT_STATE_DIR") if unit else None
        )
        return Path(named) if named else default_state_dir(self.ctx.environ)

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
    ) -> ServiceReport:
        """`push` not given keeps the installed unit's push options; their secrets are kept
        in the state dir (`state/push_secrets.py`), checked by `check_push` first."""
        current = self.installed()  # fails closed before any systemctl call
        old_socket = self._read(self.socket_path)
        installed = current[1] if current else None
        plan = push_plan(push, _installed_argv(installed.unit) if installed else ())
        self.systemctl.reachable()
        binding, before = resolve_binding(
            explicit=explicit_home,
            installed=installed,
            ambient_codex_home=self.ctx.environ.get("CODEX_HOME") or None,
            ambient_sqlite_home=self.ctx.environ.get("CODEX_SQLITE_HOME") or None,
            user_home=self.ctx.user_home,
        )
        warnings = [self.ctx.service_warning] if self.ctx.service_warning else []
        if not Path(binding.path).is_dir():
            warnings.append(f"Codex home {binding.path} does not exist yet")
        chosen_port = port or (installed.unit.port() if installed else None) or DEFAULT_PORT
        service, socket, kept, dropped = self.build(
            binding,
            installed,
            chosen_port,
            warnings,
            notify=notify,
            notify_url=notify_url,
            approval=approval,
            public_url=public_url,
            push=plan,
        )
        state_dir = self.service_state_dir(installed.unit if installed else None)
        moved = keep_push_secrets(
            state_dir,
            plan,
            self.ctx.environ,
            check_push,
            in_definition=installed.unit.environment() if installed else {},
        )
        # As the LaunchAgent's: a secret others could read refuses here, before any write.
        ensure_secret(state_dir)
        previous = current[0] if current else None
        socket_changed = old_socket != socket
        backups = [
            self._write(self.unit_path, service, previous),
            self._write(self.socket_path, socket, old_socket),
        ]
        try:
            self._reload(socket_changed)
        except ServiceUnitError:
            self._restore(previous, old_socket, socket_changed)
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
        report.notes += [f"previous unit kept at {b}" for b in backups if b is not None]
        return report

    def _reload(self, socket_changed: bool) -> None:
        """Tell systemd: reload the files, enable both units, and (re)start the service; a
        changed socket (a new port) is restarted while the service is down."""
        ctl = self.systemctl
        ctl.daemon_reload()
        ctl.enable(SOCKET_UNIT, SERVICE_UNIT)
        ctl.stop(SERVICE_UNIT)
        if socket_changed:
            ctl.stop(SOCKET_UNIT)
        ctl.start(SOCKET_UNIT, SERVICE_UNIT)

    def _restore(self, service: str | None, socket: str | None, socket_changed: bool) -> None:
        """Best effort after a failed reload: the previous units back, loaded and started."""
        try:
            for path, text in ((self.unit_path, service), (self.socket_path, socket)):
                if text is None:
                    path.unlink(missing_ok=True)
                else:
                    atomic_write_bytes(path, text.encode(), mode=UNIT_MODE)
            if service is not None:
                self._reload(socket_changed)
        except (OSError, ServiceUnitError):
            pass

    def _not_installed(self, verb: str) -> ServiceUnitError:
        return ServiceUnitError(
            "the systemd user service is not installed",
            error_code="not_installed",
            remedy=Remedy(
                summary=f"Nothing to {verb}.", next_action="Run `loopx-chat service install`."
            ),
        )

    def start(self) -> ServiceReport:
        if self.installed() is None:
            raise self._not_installed("start")
        self.systemctl.start(SOCKET_UNIT, SERVICE_UNIT)
        return self.status(action="start")

    def stop(self) -> ServiceReport:
        if self.installed() is None:
            raise self._not_installed("stop")
        # The socket too: otherwise the next connection would start the service again.
        self.systemctl.stop(SERVICE_UNIT, SOCKET_UNIT)
        report = self.status(action="stop")
        report.notes.append("stopped until the next `start`, `install` or login")
        return report

    def restart(self, *, port: int | None = None) -> ServiceReport:
        return self.install(explicit_home=None, port=port, action="restart")

    def uninstall(self) -> ServiceReport:
        for path in (self.unit_path, self.socket_path):
            if path.is_symlink() or (path.exists() and not path.is_file()):
                raise ServiceUnitError(
                    f"{path} is not a regular file; remove it by hand", error_code="unit_unsafe"
                )
        ctl = self.systemctl
        ctl.reachable()
        ctl.stop(SERVICE_UNIT, SOCKET_UNIT)
        ctl.disable(SERVICE_UNIT, SOCKET_UNIT)
        removed = []
        for path in (self.unit_path, self.socket_path):
            try:
                path.unlink()
                removed.append(str(path))
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise ServiceUnitError(
                    f"the service was stopped but {path} could not be removed: {exc.strerror}",
                    error_code="unit_unwritable",
                ) from None
        ctl.daemon_reload()
        report = self.status(action="uninstall")
        report.notes.append(
            (f"removed {', '.join(removed)}" if removed else "no unit was installed")
            + f"; your drop-ins in {self.dropin_dir} (if any), logs and loopx-chat state "
            "were left in place"
        )
        return report

    def status(self, action: str = "status") -> ServiceReport:
        current = self.installed()
        installed = current[1] if current else None
        try:
            state = self.systemctl.state(SERVICE_UNIT)
        except ServiceUnitError as exc:
            if exc.error_code != "systemctl_unavailable":
                raise
            state = UnitState(active="unknown", enabled=False)  # no systemd here at all
        port = (installed.unit.port() if installed else None) or DEFAULT_PORT
        report = ServiceReport(
            action=action,
            unit_path=str(self.unit_path),
            state=classify(installed is not None, state),
            active=state.active,
            enabled=state.enabled,
            pid=state.pid,
            last_exit_code=state.last_exit_code,
            port=port,
        )
        if installed is not None:
            report.dropins = [d.where for d in installed.dropins]
            try:
                found = existing_binding(installed, self.ctx.user_home)
                report.binding = {"path": found.path, "source": found.source}
                if found.sqlite_home:
                    report.binding["sqlite_home"] = found.sqlite_home
            except ServiceUnitError as exc:
                report.warnings.append(
                    f"the installed unit's Codex home cannot be decided ({exc.error_code})"
                )
        if report.state == "installed_manager_unavailable":
            report.warnings.append("no systemd user manager answers (`systemctl --user`)")
        if report.state == "active_without_unit":
            report.warnings.append("systemd still runs the service but its unit file is gone")
        if state.running:
            bound = report.binding["path"] if report.binding else None
            state_dir = self.service_state_dir(installed.unit if installed else None)
            report.service, warnings = self._facts(state_dir, bound)
            report.warnings += warnings
        return report
