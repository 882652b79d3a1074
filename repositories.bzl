"""sloth_dependencies(): the one macro a consumer workspace calls.

Everything resolves offline: system libraries under /usr (Debian packages that
./bazelw installs), Debian's rules_java, and small in-line stand-ins for the
rules Bazel 4 would otherwise try to download.
"""

def _files_repo_impl(rctx):
    for path, content in rctx.attr.files.items():
        rctx.file(path, content, executable = path.endswith(".sh"))

_files_repo = repository_rule(
    implementation = _files_repo_impl,
    attrs = {"files": attr.string_dict()},
    local = True,
)

def _local_cuda_impl(rctx):
    path = rctx.os.environ.get("CUDA_PATH", rctx.attr.path)
    if rctx.path(path + "/bin/nvcc").exists:
        for d in ["bin", "include", "lib64", "nvvm"]:
            if rctx.path(path + "/" + d).exists:
                rctx.symlink(path + "/" + d, d)
        rctx.symlink(rctx.attr.build_file, "BUILD")
    else:
        # No toolkit: same target names, all empty, so `bazel test //...`
        # can load (and skip) the CUDA targets.
        rctx.file("BUILD", "\n".join([
            'package(default_visibility = ["//visibility:public"])',
            'filegroup(name = "nvcc")',
            'cc_library(name = "headers")',
            'cc_library(name = "cudart")',
            'cc_library(name = "cublas")',
            'cc_library(name = "nvrtc")',
            'cc_library(name = "cuda_driver")',
            'cc_library(name = "nccl")',
        ]) + "\n")
    rctx.file("WORKSPACE", "")

_local_cuda_repository = repository_rule(
    implementation = _local_cuda_impl,
    attrs = {"path": attr.string(), "build_file": attr.label()},
    environ = ["CUDA_PATH"],
    local = True,
)

_RULES_CC_DEFS = "\n".join([
    "def cc_library(**kw): native.cc_library(**kw)",
    "def cc_binary(**kw): native.cc_binary(**kw)",
    "def cc_test(**kw): native.cc_test(**kw)",
    "def cc_import(**kw): native.cc_import(**kw)",
    "def cc_toolchain(**kw): native.cc_toolchain(**kw)",
    "def cc_toolchain_suite(**kw): native.cc_toolchain_suite(**kw)",
    "def cc_proto_library(**kw): native.cc_proto_library(**kw)",
    "def objc_library(**kw): native.objc_library(**kw)",
]) + "\n"

def sloth_dependencies(cuda_path = "/usr/local/cuda"):
    existing = native.existing_rules()
    if "rules_cc" not in existing:
        _files_repo(name = "rules_cc", files = {
            "WORKSPACE": "",
            "BUILD": "",
            "cc/BUILD": 'package(default_visibility=["//visibility:public"])\n' +
                        'alias(name="toolchain_type", actual="@bazel_tools//tools/cpp:toolchain_type")\n',
            "cc/defs.bzl": _RULES_CC_DEFS,
        })
    if "rules_java" not in existing:
        native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")
    if "remote_coverage_tools" not in existing:
        _files_repo(name = "remote_coverage_tools", files = {
            "WORKSPACE": "",
            "stub.sh": "#!/bin/sh\nexit 0\n",
            "BUILD": 'filegroup(name="coverage_report_generator", srcs=["stub.sh"], visibility=["//visibility:public"])\n' +
                     'filegroup(name="lcov_merger", srcs=["stub.sh"], visibility=["//visibility:public"])\n',
        })
    for name in ["absl", "gtest", "benchmark", "openblas", "zlib", "nlohmann_json", "mpi"]:
        if name not in existing:
            native.new_local_repository(
                name = name,
                path = "/usr",
                build_file = str(Label("//third_party:%s.BUILD" % name)),
            )
    if "local_cuda" not in existing:
        _local_cuda_repository(
            name = "local_cuda",
            path = cuda_path,
            build_file = Label("//third_party:cuda.BUILD"),
        )
