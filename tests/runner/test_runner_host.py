import pytest

from madengine_rocprof.errors import UserError
from madengine_rocprof.runner import host


def test_parse_gpu_list():
    assert host.parse_gpu_list("0,2-4") == [0, 2, 3, 4]
    assert host.parse_gpu_list("all") is None and host.parse_gpu_list("") is None
    assert host.parse_gpu_list("1, 1,0") == [1, 0]
    for bad in ("a", "3-1", "1-x"):
        with pytest.raises(UserError):
            host.parse_gpu_list(bad)


def test_amd_devices_kfd_render_nodes_and_video_group(monkeypatch):
    nodes = ["/dev/dri/renderD130", "/dev/dri/renderD128", "/dev/dri/renderD129"]
    monkeypatch.setattr(host.glob, "glob", lambda pattern: list(nodes) if "renderD" in pattern else [])
    opts, _ = host.device_options("AMD", None)
    assert opts["devices"] == ["/dev/kfd:/dev/kfd:rwm"] + [
        f"/dev/dri/renderD{n}:/dev/dri/renderD{n}:rwm" for n in (128, 129, 130)
    ]
    assert opts["group_add"] == ["video"] and "seccomp=unconfined" in opts["security_opt"]
    opts, _ = host.device_options("AMD", "0,2")
    assert opts["devices"][1:] == [
        "/dev/dri/renderD128:/dev/dri/renderD128:rwm",
        "/dev/dri/renderD130:/dev/dri/renderD130:rwm",
    ]
    with pytest.raises(UserError, match="GPU 3 does not exist"):
        host.device_options("AMD", "3")


def test_nvidia_device_requests_honour_docker_gpus():
    opts, _ = host.device_options("NVIDIA", "1-2")
    (req,) = opts["device_requests"]
    assert req["DeviceIDs"] == ["1", "2"] and req["Capabilities"] == [["gpu"]]
    assert "devices" not in opts
    (req,) = host.device_options("NVIDIA", None)[0]["device_requests"]
    assert req["Count"] == -1


def test_cpu_has_no_devices_and_warns_about_docker_gpus():
    opts, warnings = host.device_options("CPU", "0")
    assert "devices" not in opts and "device_requests" not in opts and warnings


def test_effective_vendor_prefers_what_is_here():
    assert host.effective_vendor(None, "NVIDIA") == ("NVIDIA", [])
    assert host.effective_vendor("AMD", "AMD") == ("AMD", [])
    vendor, notes = host.effective_vendor("AMD", "CPU")
    assert vendor == "CPU" and "no GPU" in notes[0]


def test_visible_devices_for_local_runs():
    assert host.visible_devices_env("AMD", "1") == {"HIP_VISIBLE_DEVICES": "1"}
    assert host.visible_devices_env("NVIDIA", "0-1") == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert host.visible_devices_env("NVIDIA", None) == {}
