"""The capture configuration: the seed's YAML, both nestings, and errors that name key, value and choices."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from my_utils.core.errors import ConfigError
from my_utils.tracing.capture.config import (
    CaptureConfig,
    Edge,
    StopPolicy,
    load_capture_config,
    parse_capture_config,
)

DATA = Path(__file__).parent / "data"
SEED_YAML = DATA / "seed_profile_config.yaml"


def seed_dict() -> dict:
    return yaml.safe_load(SEED_YAML.read_text(encoding="utf-8"))


def test_seed_yaml_parses_with_every_key() -> None:
    cfg = load_capture_config(SEED_YAML)
    assert isinstance(cfg, CaptureConfig) and cfg.enabled and cfg.source == str(SEED_YAML)
    assert (cfg.backend, cfg.nvtx_window, cfg.debug_watch) == ("cudaProfilerApi", True, False)
    assert cfg.default_stop_policy is StopPolicy.ON_TRIGGER_FUNC_EXIT  # ON_TARGET_FUNC_EXIT normalised
    assert cfg.schedule.steps == (5, 10) and cfg.schedule.max_windows_per_step == 2
    assert cfg.schedule.roles == ("generator", "critic")
    (w,) = cfg.windows
    assert (w.name, w.role, w.start_iter, w.stop_iter) == ("forward_window", "generator", 5, 5)
    assert (w.start_mb_selector, w.stop_mb_selector) == ("first", "last")
    assert w.start_profile_names == w.stop_profile_names == ("model.forward",)
    assert (w.stop_policy, w.stop_edge, w.ranks_filter, w.enable_nvtx_window) == (
        StopPolicy.ON_STOP_PROFILE_NAME, Edge.EXIT, (0, 1), True)


def test_sections_may_sit_at_the_top_level_and_roles_under_capture() -> None:
    nested = seed_dict()
    flat = {"profile": {"enabled": True}, "features": nested["profile"]["features"],
            "capture": dict(nested["profile"]["capture"])}
    flat["capture"]["roles"] = flat["capture"]["schedule"].pop("roles")
    assert parse_capture_config(flat).windows == parse_capture_config(nested).windows
    assert parse_capture_config(flat).schedule.roles == ("generator", "critic")
    inner = nested["profile"]  # the profile section passed on its own
    assert parse_capture_config(inner) == parse_capture_config(nested)


@pytest.mark.parametrize(("enabled", "feature", "expected"), [
    (True, True, True), (False, True, False), (True, False, False)])
def test_enabled_needs_both_switches(enabled: bool, feature: bool, expected: bool) -> None:
    cfg = seed_dict()
    cfg["profile"]["enabled"] = enabled
    cfg["profile"]["features"]["capture"]["enabled"] = feature
    assert parse_capture_config(cfg).enabled is expected


def _window_error(**window: object) -> str:
    window.setdefault("start_iter", 5)
    with pytest.raises(ConfigError) as info:
        parse_capture_config({"capture": {"windows": [window]}}, source="cfg.yaml")
    return str(info.value)


@pytest.mark.parametrize(("window", "key", "fragments"), [
    ({"stop_policy": "ON_EXIT"}, "capture.windows[0].stop_policy",
     ["'ON_EXIT'", "ON_TARGET_FUNC_EXIT", "ON_TRIGGER_FUNC_EXIT", "ON_STOP_PROFILE_NAME"]),
    ({"stop_edge": "MIDDLE"}, "capture.windows[0].stop_edge", ["'MIDDLE'", "ENTER, EXIT"]),
    ({"start_mb_selector": "second"}, "capture.windows[0].start_mb_selector", ["'second'", "first, last"]),
    ({"stop_mb_selector": -1}, "capture.windows[0].stop_mb_selector", ["-1", "index >= 0"]),
    ({"start_iter": "5x"}, "capture.windows[0].start_iter", ["'5x'", "iteration >= 0"]),
    ({"stop_iter": 3}, "capture.windows[0].stop_iter", ["3", "start_iter (5)"]),
    ({"ranks_filter": ["0"]}, "capture.windows[0].ranks_filter", ["['0']", "integers >= 0"]),
    ({"enable_nvtx_window": "yes"}, "capture.windows[0].enable_nvtx_window", ["'yes'", "true or false"]),
    ({"stop_mb_selectr": "last"}, "capture.windows[0].stop_mb_selectr", ["unknown key", "stop_mb_selector"]),
    ({"start_mb_selector": 4, "stop_mb_selector": 2}, "capture.windows[0].stop_mb_selector", [">= start"]),
])
def test_window_errors_name_key_value_and_choices(window: dict, key: str, fragments: list[str]) -> None:
    message = _window_error(**window)
    assert message.startswith(f"cfg.yaml:key {key}: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize(("cfg", "key", "fragment"), [
    ({"features": {"capture": {"default_stop_policy": "NEVER"}}}, "features.capture.default_stop_policy",
     "ON_STOP_PROFILE_NAME"),
    ({"features": {"capture": {"backnd": "x"}}}, "features.capture.backnd", "allowed keys: backend"),
    ({"capture": {"schedule": {"steps": "5"}}}, "capture.schedule.steps", "list of integers"),
    ({"capture": {"schedule": {"max_windows_per_step": 0}}}, "capture.schedule.max_windows_per_step",
     "integer >= 1"),
    ({"capture": {"windows": [{"name": "a", "start_iter": 1}, {"name": "a", "start_iter": 2}]}},
     "capture.windows[1].name", "no other window"),
    ({"capture": {"windows": [{"name": "a"}]}}, "capture.windows[0].start_iter", "schedule.steps"),
    ({"profile": {"enabled": "yes"}}, "profile.enabled", "true or false"),
    ({"capture": {"windows": {"name": "a"}}}, "capture.windows", "list of windows"),
])
def test_section_errors(cfg: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_capture_config(cfg, source="c.yaml")
    assert str(info.value).startswith(f"c.yaml:key {key}: ") and fragment in str(info.value), str(info.value)


def test_yaml_is_read_with_safe_load(tmp_path: Path) -> None:
    evil = tmp_path / "evil.yaml"
    evil.write_text("profile: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match=r"evil.yaml:line 1: invalid YAML"):
        load_capture_config(evil)
    broken = tmp_path / "broken.yaml"
    broken.write_text("capture:\n  windows: [\n")
    with pytest.raises(ConfigError, match=r"broken.yaml:line \d+: invalid YAML"):
        load_capture_config(broken)


selectors = st.one_of(st.sampled_from(["first", "last", "FIRST", " last "]), st.integers(0, 64),
                      st.integers(0, 64).map(str))
policies = st.sampled_from(["ON_TARGET_FUNC_EXIT", "ON_TRIGGER_FUNC_EXIT", "ON_STOP_PROFILE_NAME",
                            "on_stop_profile_name"])


@given(start=st.integers(0, 10_000), span=st.integers(0, 50), start_mb=selectors, policy=policies,
       edge=st.sampled_from(["ENTER", "EXIT", "enter"]))
def test_valid_windows_always_parse(start: int, span: int, start_mb: object, policy: str, edge: str) -> None:
    cfg = {"capture": {"windows": [{"name": "w", "start_iter": start, "stop_iter": start + span,
                                    "start_mb_selector": start_mb, "stop_policy": policy, "stop_edge": edge}]}}
    (w,) = parse_capture_config(cfg).windows
    assert w.start_iter == start and w.stop_iter == start + span
    assert w.stop_policy in (StopPolicy.ON_TRIGGER_FUNC_EXIT, StopPolicy.ON_STOP_PROFILE_NAME)
    assert w.start_mb_selector in ("first", "last") or isinstance(w.start_mb_selector, int)


@given(value=st.one_of(st.text(max_size=12), st.floats(), st.booleans(), st.integers(-50, -1),
                       st.lists(st.integers(), max_size=2)))
def test_any_bad_selector_is_a_config_error_naming_the_key(value: object) -> None:
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("first", "last") or (text is not None and text.isdigit()):
        return  # a valid spelling
    with pytest.raises(ConfigError, match=r"key capture\.windows\[0\]\.start_mb_selector: got .*first, last"):
        parse_capture_config({"capture": {"windows": [{"start_iter": 1, "start_mb_selector": value}]}})
