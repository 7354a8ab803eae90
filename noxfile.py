"""Every check a person or CI runs: `.venv/bin/python -m nox -l` lists them (README.md makes .venv).

Sessions build their own virtual environments from this repository (pip only). torch is
always the exact CPU-wheel pin `torch==2.13.0`; a looser spec would download a CUDA build.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint"]

MEMBERS = ["core", "tracing", "hooks", "distributed", "memory", "profiling", "legacy"]
TORCH = "torch==2.13.0"
#: the README's test command: one xdist worker per CPU, grouped tests kept together (conftest.py)
PARALLEL = ("-n", "auto", "--dist", "loadgroup")
# Each member's own distributions of my_utils: core + itself (+ what it declares).
MEMBER_DEPS = {
    "core": ["core"],
    "tracing": ["core", "tracing"],
    "hooks": ["core", "tracing", "hooks"],
    "distributed": ["core", "distributed[etcd]"],
    "memory": ["core", "memory[nvml,system,charts]"],
    "profiling": ["core", "profiling[dask]"],
    "legacy": [*MEMBERS[:-1], "legacy[charts]"],
}


def _editable(*members: str) -> list[str]:
    args: list[str] = []
    for member in members:
        name, _, extra = member.partition("[")
        args += ["-e", f"./packages/myutils-{name}" + (f"[{extra}" if extra else "")]
    return args


def _pytest_in_dev_env(session: nox.Session, *args: str) -> None:
    """Install the development set-up (all seven, editable) and run pytest with ``args``."""
    session.install("-r", "requirements-dev.txt")
    session.run("python", "-m", "pytest", *args, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole suite, all seven distributions installed editable, in parallel (what CI runs)."""
    _pytest_in_dev_env(session, *PARALLEL)


@nox.session
@nox.parametrize("member", MEMBERS)
def isolated(session: nox.Session, member: str) -> None:
    """One distribution's tests with only core + that distribution installed.

    Catches undeclared cross-distribution imports (e.g. profiling importing tracing).
    """
    session.install(*_editable(*MEMBER_DEPS[member]), TORCH, "-r", "requirements-test.txt")
    session.run("python", "-m", "pytest", f"packages/myutils-{member}/tests", "-p", "no:cacheprovider",
                *session.posargs)


@nox.session
def integration(session: nox.Session) -> None:
    """Cross-distribution tests: plugin packages in fresh venvs, wheels, services."""
    _pytest_in_dev_env(session, "tests-integration")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the tree; mypy over the namespace packages (never `-p my_utils.core`: a duplicate)."""
    session.install("-r", "requirements-dev.txt")
    session.run("python", "-m", "ruff", "check", ".")
    session.run(
        "python", "-m", "mypy", "-p", "my_utils",
        *[arg for member in MEMBERS if member != "core" for arg in ("-p", f"my_utils.{member}")],
    )
    # the repository-level test helpers: the fixture registry and the root conftest
    session.run("python", "-m", "mypy", "fixtures/real_fixtures.py", "conftest.py")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with MkDocs, every warning an error (output in build/site)."""
    # all seven installed: the command reference is generated from the installed CLIs and plugins
    session.install("-r", "requirements-dev.txt")
    session.run("python", "-m", "mkdocs", "build", "--strict", *session.posargs)


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every wheel and check what each one ships."""
    _pytest_in_dev_env(session, "tests-integration/test_wheels.py")


@nox.session
def dist(session: nox.Session) -> None:
    """Build the seven wheels into one folder (`dist/`, or the folder after `--`) for
    `pip install --find-links dist myutils-profiling`: one part, with myutils-core from the same folder."""
    session.install("build>=1.2", "hatchling>=1.26")
    out = session.posargs[0] if session.posargs else "dist"
    for member in MEMBERS:
        session.run("python", "-m", "build", "--wheel", "--no-isolation", "--outdir", out,
                    f"packages/myutils-{member}", silent=True)
    session.log(f"wheels in {out}/: pip install --find-links {out} myutils-<part>")


@nox.session
def gpu(session: nox.Session) -> None:
    """The `cuda`-marked tests; only meaningful on a machine with a CUDA GPU and a CUDA torch."""
    _pytest_in_dev_env(session, "-m", "cuda")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against the anchors, measured in one run (figures are printed, not asserted)."""
    session.install("-r", "requirements-dev.txt", "-r", "bench/requirements.txt")
    session.run("python", "bench/run_all.py", *session.posargs)


@nox.session
def mutants(session: nox.Session) -> None:
    """The hand-written mutation run (`.ci/mutants.toml`): exit 1 when a planted bug survives the tests."""
    session.install("-r", "requirements-dev.txt")
    session.run("python", ".ci/mutants.py", *session.posargs)
