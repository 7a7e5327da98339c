"""What the build under test has, as its generated hvd_build_config.h says
(HVD_BUILD_DIR/generated): for the suites that check hvd's capability
queries (nccl_built(), cuda_built(), ...) against the build."""
import os
import re


def build_config():
    """The build's hvd_build_config.h as {name: int} (HVD_BUILT_*)."""
    path = os.path.join(os.environ["HVD_BUILD_DIR"], "generated", "hvd_build_config.h")
    with open(path) as f:
        return {m[0]: int(m[1]) for m in re.findall(r"#define (HVD_BUILT_\w+) (\d+)", f.read())}
