"""``myutils launch``: print the ``nsys profile`` line for a framework and the installed nsys.

Defined in a function (``add_commands``) that the tracing plugin's ``myutils_cli`` hook calls, so
``myutils --help`` imports none of it. No ``from __future__ import annotations``: typer reads the
annotations at run time.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer


def _override(options: list[str]) -> dict[str, object]:
    """``-o key=value`` (value read as YAML: true, 12, node, [cuda, nvtx]) → {key: value}."""
    import yaml

    from my_utils.core.errors import UsageError

    out: dict[str, object] = {}
    for item in options:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-o {item!r}: expected key=value, e.g. -o cuda_graph_trace=node")
        try:
            out[key.strip()] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            out[key.strip()] = text
    return out


def add_commands(app: "typer.Typer") -> None:
    """Add ``myutils launch nsys`` and ``myutils launch profiles``."""
    from typing import Annotated

    import typer

    from my_utils.core.cli.guard import exit_on_error

    launch_app = typer.Typer(help="Framework launch lines: nsys profile prefixes chosen by the nsys version.",
                             no_args_is_help=True, rich_markup_mode=None)

    @exit_on_error
    def nsys(
        profile: Annotated[str, typer.Argument(help="a framework (deepspeed, megatron, torchtitan, vllm, sglang, "
                                                    "hf_trainer) or a profile .yaml file")],
        command: Annotated[list[str] | None, typer.Argument(help="the launch command, after --")] = None,
        executable: Annotated[str, typer.Option("--nsys", help="the nsys to probe and run")] = "nsys",
        version: Annotated[str | None, typer.Option("--nsys-version", help="build for this nsys version "
                                                    "(YEAR.MINOR) instead of probing one")] = None,
        option: Annotated[list[str] | None, typer.Option("-o", "--option", help="override a profile's nsys "
                                                         "option: key=value (e.g. pytorch=autograd-nvtx)")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="print the command as JSON (argv, env, dropped)")]
        = False,
    ) -> None:
        """Print the command that profiles COMMAND with nsys, as PROFILE sets it up, for the installed nsys."""
        import json
        from dataclasses import replace

        from my_utils.core.errors import UsageError
        from my_utils.tracing.launch.nsys_command import NsysOptions, build_nsys_command
        from my_utils.tracing.launch.nsys_docs import NsysVersion
        from my_utils.tracing.launch.nsys_probe import probe_nsys
        from my_utils.tracing.launch.profiles import profile_named

        chosen = profile_named(profile)
        options = chosen.nsys
        extra = _override(option or [])
        if extra:
            merged = NsysOptions.from_mapping(extra, "command line (-o)")
            options = replace(options, **{k.replace("-", "_"): getattr(merged, k.replace("-", "_")) for k in extra})
        if version is not None:
            found, exe = NsysVersion.parse(version), executable
        else:
            probe = probe_nsys(executable)
            if probe.version is None:
                raise UsageError(f"nsys version unknown: {probe.reason}; install nsys, give --nsys PATH, or "
                                 "--nsys-version YEAR.MINOR to build the line for that version")
            found, exe = probe.version, probe.executable or executable
        built = build_nsys_command(options, found, command or [], env=chosen.env, nsys=exe)
        if json_out:
            typer.echo(json.dumps({"framework": chosen.framework, "nsys_version": str(found),
                                   "documented_version": str(built.documented), "env": dict(built.env),
                                   "argv": built.argv, "shell": built.shell(),
                                   "dropped": [{"option": o, "reason": r} for o, r in built.dropped],
                                   "notes": [*built.notes, *chosen.notes]}, indent=1))
            return
        typer.echo(built.shell())
        for note in built.notes:
            typer.echo(f"# {note}", err=True)
        for opt, reason in built.dropped:
            typer.echo(f"# left out {opt}: {reason}", err=True)
        for note in chosen.notes:
            typer.echo(f"# {chosen.framework}: {note}", err=True)

    @exit_on_error
    def profiles() -> None:
        """List the shipped launch profiles."""
        from my_utils.tracing.launch.profiles import framework_profiles

        for name, p in framework_profiles().items():
            typer.echo(f"{name:<12} {p.description}\n{'':<12} e.g. {p.launcher}")

    launch_app.command("nsys")(nsys)
    launch_app.command("profiles")(profiles)
    app.add_typer(launch_app, name="launch")
