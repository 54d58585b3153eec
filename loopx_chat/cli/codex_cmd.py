"""`loopx-chat codex facts`: compact facts about the bound home's threads, from its rollouts."""

from __future__ import annotations

import click

from loopx_chat.cli.context import CliContext, json_option
from loopx_chat.codex.rollouts.host_facts import scanner_for
from loopx_chat.codex.rollouts.render import facts_document


@click.group("codex")
def codex() -> None:
    """Read-only views of the Codex host."""


@codex.command("facts")
@json_option
@click.pass_obj
def facts(cli: CliContext, as_json: bool) -> None:
    """Per thread: turn counts, last outcome and error code, tokens, models, history mode.

    Reads only appended bytes since the last scan; never keeps text, tool output or paths.
    """
    result = scanner_for(cli.state_dir, cli.binding().path).scan()
    if as_json:
        # The same text `emit_json` would print, laid out without json's pure-Python encoder.
        click.echo(facts_document(result))
        return
    click.echo(
        f"{len(result.threads)} thread(s) in {result.files} rollout file(s); read "
        f"{result.bytes_read} new bytes; {result.corrupt_lines} corrupt line(s)"
    )
    for thread_id in sorted(result.threads):
        t = result.threads[thread_id]
        last = t.last_turn
        click.echo(
            f"{thread_id}  turns={t.turns.started} ok={t.turns.completed} "
            f"failed={t.turns.failed} interrupted={t.turns.interrupted} "
            f"unfinished={t.turns.unfinished}  last={last.outcome if last else '-'}"
            + (f" [{last.error_code}]" if last and last.error_code else "")
            + f"  tokens={t.tokens.total_tokens if t.tokens else 0}  at={t.latest_event_at}"
        )
