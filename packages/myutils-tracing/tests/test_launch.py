"""Framework launchers: the nsys version probed through a fake ``nsys`` on PATH, and every generated line checked
against the options that version documents (the fake refuses the others, as nsys refuses unknown switches)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from my_utils.core.errors import ConfigError, UsageError
from my_utils.tracing.launch import (
    NSYS_DOCS,
    NsysOptions,
    NsysVersion,
    build_nsys_command,
    check_nsys_args,
    documented_flags,
    framework_profiles,
    load_profile,
    probe_nsys,
)

FRAMEWORKS = ("deepspeed", "megatron", "torchtitan", "vllm", "sglang", "hf_trainer")
#: every documented version, one between two of them, and one older than all
VERSIONS = (*(str(v) for v in sorted(NSYS_DOCS)), "2025.1.3", "2023.4.1")


def fake_nsys(folder: Path, version_line: str, rc: int = 0) -> Path:
    """An ``nsys`` that prints ``version_line`` for --version and, for ``profile``, refuses any switch the
    table does not document for its version (exit 1, as nsys does), else runs the application."""
    folder.mkdir(parents=True, exist_ok=True)
    documented = {}
    try:
        _used, options, _ = documented_flags(NsysVersion.parse(version_line))
        documented = {flag: list(doc.values) for flag, doc in options.items()}
    except UsageError:
        pass
    exe = folder / "nsys"
    exe.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import subprocess, sys
        documented = {documented!r}
        args = sys.argv[1:]
        if args == ["--version"]:
            print({version_line!r})
            sys.exit({rc})
        assert args[0] == "profile", args
        rest = args[1:]
        app = rest[rest.index("--") + 1:] if "--" in rest else []
        for arg in rest[:len(rest) - len(app) - (1 if app else 0)]:
            flag, _, value = arg.partition("=")
            if flag not in documented or (documented[flag] and value not in documented[flag]):
                print(f"unrecognised option {{arg}}", file=sys.stderr)
                sys.exit(1)
        sys.exit(subprocess.run(app).returncode)
        """))
    exe.chmod(0o755)
    return exe


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def put(version_line: str, rc: int = 0) -> Path:
        exe = fake_nsys(tmp_path / f"bin{abs(hash(version_line))}", version_line, rc)
        monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
        return exe
    return put


def test_every_documented_row_names_its_source() -> None:
    for version, options in NSYS_DOCS.items():
        assert "--trace" in options and "--output" in options
        for flag, doc in options.items():
            assert flag.startswith("--") and "docs.nvidia.com/nsight-systems" in doc.source, (version, flag)
    assert "--pytorch" not in NSYS_DOCS[NsysVersion(2024, 7)] and "--pytorch" in NSYS_DOCS[NsysVersion(2026, 2)]
    assert "2025.6/ReleaseNotes" in NSYS_DOCS[NsysVersion(2025, 6)]["--cuda-trace-scope"].source


@pytest.mark.parametrize(("line", "expected"), [
    ("NVIDIA Nsight Systems version 2024.7.1.84-247134868870v0", NsysVersion(2024, 7, 1)),
    ("NVIDIA Nsight Systems version 2026.2.1.210-262139437385v0", NsysVersion(2026, 2, 1)),
    ("NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0", NsysVersion(2023, 4, 4)),
])
def test_the_probe_reads_the_version(on_path, line: str, expected: NsysVersion) -> None:  # type: ignore[no-untyped-def]
    exe = on_path(line)
    probe = probe_nsys()
    assert probe.version == expected and probe.executable == str(exe) and probe.reason is None


def test_a_missing_or_broken_nsys_is_said(on_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    assert "not an executable on PATH" in (probe_nsys("nsys-that-is-not-there").reason or "")
    on_path("Segmentation fault", rc=139)
    assert "exited 139" in (probe_nsys().reason or "")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_generated_line_uses_only_what_its_nsys_documents(framework: str, version: str, on_path,  # type: ignore[no-untyped-def]
                                                               tmp_path: Path) -> None:
    profile = framework_profiles()[framework]
    v = NsysVersion.parse(version)
    built = build_nsys_command(profile.nsys, v, [sys.executable, "-c", "print('app ran')"], env=profile.env)
    assert check_nsys_args(built.args, v) == []
    used, options, note = documented_flags(v)
    assert built.documented == used and (note is not None) == (v < min(NSYS_DOCS))
    for option, reason in built.dropped:  # what was left out is exactly what the version lacks
        flag = option.partition("=")[0]
        assert flag not in options or options[flag].values, option
        assert f"nsys {version}" in reason or f"nsys {used}" in reason
    asked = {flag for flag, _ in profile.nsys.switches()}
    kept = {a.partition("=")[0] for a in built.args}
    assert kept | {d[0].partition("=")[0] for d in built.dropped} == asked
    # run it: the fake nsys refuses any switch its version does not document, then runs the application
    exe = on_path(f"NVIDIA Nsight Systems version {version}")
    proc = subprocess.run([str(exe), "profile", *built.args, "--", *built.command], capture_output=True, text=True,
                          env={**os.environ, **dict(built.env)}, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "app ran", proc.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_flags_chosen_by_version(version: str) -> None:
    v = NsysVersion.parse(version)
    profiles = framework_profiles()
    hf = build_nsys_command(profiles["hf_trainer"].nsys, v)
    if v >= NsysVersion(2026, 2):
        assert "--pytorch=autograd-nvtx" in hf.args and not hf.dropped
    else:
        assert [d[0] for d in hf.dropped] == ["--pytorch=autograd-nvtx"]
        assert "documented from nsys 2026.2" in hf.dropped[0][1]
    for serving in ("vllm", "sglang"):
        args = build_nsys_command(profiles[serving].nsys, v).args
        assert "--cuda-graph-trace=node" in args and "--trace-fork-before-exec=true" in args
    assert dict(build_nsys_command(profiles["vllm"].nsys, v, env=profiles["vllm"].env).env) == {
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    scope = build_nsys_command(NsysOptions(cuda_event_trace=None, trace=("cuda",)), v)
    assert scope.args[0] == "--trace=cuda"


def test_check_nsys_args_names_what_is_not_documented() -> None:
    v = NsysVersion(2024, 7)
    assert check_nsys_args(["--pytorch=autograd-nvtx", "--cuda-graph-trace=kernel", "-t"], v) == [
        "--pytorch: not a profile switch nsys 2024.7 documents",
        "--cuda-graph-trace=kernel: nsys 2024.7 documents graph, node", "'-t': expected --switch=value"]
    bad = build_nsys_command(NsysOptions(cuda_graph_trace="kernel"), v)
    assert bad.dropped == (("--cuda-graph-trace=kernel", "nsys 2024.7 documents the values graph, node ("
                            + NSYS_DOCS[v]["--cuda-graph-trace"].source + ")"),)


def test_a_profile_of_yours(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("framework: mine\nenv: {NCCL_DEBUG: INFO}\nnsys: {trace: [cuda, nvtx], python_sampling: true,"
                    " python_sampling_frequency: 500, cuda_graph_trace: node}\nnotes: [a note]\n")
    p = load_profile(path)
    built = build_nsys_command(p.nsys, NsysVersion(2024, 7), ["python", "t.py"], env=p.env)
    assert built.shell().startswith("NCCL_DEBUG=INFO nsys profile --trace=cuda,nvtx ")
    assert "--python-sampling=true" in built.args and "--python-sampling-frequency=500" in built.args
    path.write_text("framework: mine\nnsys: {trace: [cuda], cuda_graph: node}\n")
    with pytest.raises(ConfigError, match=r"mine.yaml:key nsys.cuda_graph: one of capture_range, "):
        load_profile(path)
    path.write_text("framework: mine\nnsys: {stats: yes please}\n")
    with pytest.raises(ConfigError, match=r"nsys\.stats: true or false"):
        load_profile(path)


def test_the_cli_probes_nsys_and_prints_the_line(on_path) -> None:  # type: ignore[no-untyped-def]
    myutils = Path(sys.executable).with_name("myutils")
    exe = on_path("NVIDIA Nsight Systems version 2024.7.1.84-247134868870v0")
    proc = subprocess.run([str(myutils), "launch", "nsys", "hf_trainer", "--", "accelerate", "launch", "t.py"],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(f"{exe} profile --trace=cuda,nvtx,osrt,cudnn,cublas ")
    assert proc.stdout.strip().endswith("-- accelerate launch t.py") and "--pytorch" not in proc.stdout
    assert "# left out --pytorch=autograd-nvtx: nsys 2024.7.1 does not document it" in proc.stderr
    doc = json.loads(subprocess.run([str(myutils), "launch", "nsys", "vllm", "--nsys-version", "2026.2", "--json",
                                     "-o", "pytorch=autograd-shapes-nvtx", "--", "vllm", "serve", "m"],
                                    capture_output=True, text=True, timeout=120, check=True).stdout)
    assert doc["env"] == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"} and doc["dropped"] == []
    assert "--pytorch=autograd-shapes-nvtx" in doc["argv"] and doc["argv"][-3:] == ["vllm", "serve", "m"]
    missing = subprocess.run([str(myutils), "launch", "nsys", "vllm", "--nsys", "no-such-nsys", "--", "x"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "--nsys-version YEAR.MINOR" in missing.stderr
