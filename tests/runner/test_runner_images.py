import pytest

from madengine_rocprof.errors import UserError
from madengine_rocprof.runner.images import dockerfile_context, plan_image, select_dockerfile


def _files(root):
    d = root / "docker"
    d.mkdir()
    (d / "m.ubuntu.amd.Dockerfile").write_text(
        "# CONTEXT {'gpu_vendor': 'AMD', 'guest_os': 'UBUNTU'}\nARG BASE_DOCKER=rocm/x\nFROM $BASE_DOCKER\n"
    )
    (d / "m.ubuntu.nvidia.Dockerfile").write_text(
        "# CONTEXT {'gpu_vendor': 'NVIDIA', 'guest_os': 'UBUNTU'}\nARG BASE_DOCKER=nv/x\nFROM $BASE_DOCKER\n"
    )
    (d / "m.centos.amd.Dockerfile").write_text("# CONTEXT {'gpu_vendor': 'amd', 'guest_os': 'centos'}\nFROM c\n")
    (d / "other.ubuntu.amd.Dockerfile").write_text("# CONTEXT {'gpu_vendor': 'AMD'}\nFROM o\n")
    return d


def test_context_filter_picks_vendor_and_os(tmp_path):
    d = _files(tmp_path)
    assert select_dockerfile(tmp_path, "docker/m", "AMD", "UBUNTU") == d / "m.ubuntu.amd.Dockerfile"
    assert select_dockerfile(tmp_path, "docker/m", "AMD", "CENTOS") == d / "m.centos.amd.Dockerfile"
    assert select_dockerfile(tmp_path, "docker/m", "NVIDIA") == d / "m.ubuntu.nvidia.Dockerfile"
    with pytest.raises(UserError, match="no Dockerfile for gpu_vendor CPU"):
        select_dockerfile(tmp_path, "docker/m", "CPU")
    with pytest.raises(UserError, match="no Dockerfile matches"):
        select_dockerfile(tmp_path, "docker/absent", "AMD")


def test_shipped_dockerfiles_have_madengine_headers(repo):
    for vendor, os_name in (("AMD", "UBUNTU"), ("NVIDIA", "UBUNTU"), ("CPU", None)):
        path = select_dockerfile(repo, "docker/tinytransformer", vendor, os_name)
        text = path.read_text()
        assert text.splitlines()[0].startswith("# CONTEXT {")
        assert "ARG BASE_DOCKER=" in text and "FROM $BASE_DOCKER" in text
        assert dockerfile_context(path)["gpu_vendor"] == vendor


def test_tag_is_a_content_hash(tmp_path):
    d = _files(tmp_path)
    f = d / "m.ubuntu.amd.Dockerfile"
    a = plan_image(f, {}, "sha256:base1")
    assert a.tag.startswith("madengine-rocprof/m.ubuntu.amd:") and a.base_docker == "rocm/x"
    assert plan_image(f, {}, "sha256:base1").tag == a.tag
    assert plan_image(f, {"BASE_DOCKER": "rocm/y"}, "sha256:base1").tag != a.tag
    assert plan_image(f, {}, "sha256:base2").tag != a.tag
    f.write_text(f.read_text() + "RUN true\n")
    assert plan_image(f, {}, "sha256:base1").tag != a.tag
