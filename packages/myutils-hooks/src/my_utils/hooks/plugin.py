"""The built-in plugin of myutils-hooks, registered through the ``my_utils.plugins`` entry point.

Kept import-light: the ``forward-trace`` commands are defined inside the hook (typer needs
their signatures) and import the comparison only when they run.
"""

# No ``from __future__ import annotations``: typer reads the commands' annotations, which
# name things imported inside the hook, and only eager evaluation sees them.
from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def myutils_cli(app: "typer.Typer") -> None:
    """Add ``myutils forward-trace compare A B``."""
    from pathlib import Path
    from typing import Annotated

    import typer

    from my_utils.core.cli.guard import exit_on_error

    trace_app = typer.Typer(help="Forward traces (ForwardTraceRecorder): compare two runs layer by layer.",
                            no_args_is_help=True, rich_markup_mode=None)

    @exit_on_error
    def compare(
        a: Annotated[Path, typer.Argument(help="run A's trace folder (or its index.jsonl)")],
        b: Annotated[Path, typer.Argument(help="run B's trace folder (or its index.jsonl)")],
        top: Annotated[int, typer.Option(min=1, help="differing calls to list")] = 20,
        json_out: Annotated[Path | None, typer.Option("--json", help="also write every call's comparison")] = None,
    ) -> None:
        """Where runs A and B first disagree, call by call, with the largest differences of the saved values."""
        from my_utils.core.atomic import atomic_write
        from my_utils.core.safe_io import refuse_overwriting_inputs, strict_json
        from my_utils.hooks.trace_compare import compare_traces

        if json_out is not None:
            refuse_overwriting_inputs([json_out], [a, b])
        result = compare_traces(a, b)
        typer.echo(result.render(top=top))
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(json_out) as fh:
                fh.write(strict_json(result.to_json(), indent=1) + "\n")
            typer.echo(f"wrote {json_out}")

    trace_app.command("compare")(compare)
    app.add_typer(trace_app, name="forward-trace")
