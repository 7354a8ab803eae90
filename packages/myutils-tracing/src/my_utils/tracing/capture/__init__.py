"""Capture windows: configured profiler windows driven by hook events.

``ProfileManager`` reads the configuration, ``CaptureController`` arms windows and starts /
stops a ``CaptureBackend`` on ``HookEvent``s. Legacy: ``from my_utils import ProfileManager``.
"""

from my_utils.tracing.capture.anomaly import AnomalyTrigger, StepTimeAnomalyDetector, arm_on_anomaly
from my_utils.tracing.capture.backends import (
    CaptureBackend,
    CudaProfilerBackend,
    RecordingBackend,
    TorchProfilerBackend,
)
from my_utils.tracing.capture.config import (
    CaptureConfig,
    Edge,
    StopPolicy,
    WindowConfig,
    load_capture_config,
    parse_capture_config,
)
from my_utils.tracing.capture.control_file import ControlFileWatcher
from my_utils.tracing.capture.controller import CaptureController
from my_utils.tracing.capture.lifecycle import CaptureState
from my_utils.tracing.capture.manager import ProfileManager
from my_utils.tracing.capture.spec import (
    STEP_PROFILE_NAME,
    CaptureSpec,
    HookEvent,
    StopReason,
    WindowClosing,
    WindowInfo,
)

__all__ = [
    "STEP_PROFILE_NAME",
    "AnomalyTrigger",
    "CaptureBackend",
    "CaptureConfig",
    "CaptureController",
    "CaptureSpec",
    "CaptureState",
    "ControlFileWatcher",
    "CudaProfilerBackend",
    "Edge",
    "HookEvent",
    "ProfileManager",
    "RecordingBackend",
    "StepTimeAnomalyDetector",
    "StopPolicy",
    "StopReason",
    "TorchProfilerBackend",
    "WindowClosing",
    "WindowConfig",
    "WindowInfo",
    "arm_on_anomaly",
    "load_capture_config",
    "parse_capture_config",
]
