# lit configuration for the gtest unit tests (unittest/): every executable
# named `*Tests` under build/unittest is a test binary; each gtest case is
# one lit test.
import os

import lit.formats

config.name = "SAGE-Unit"
config.suffixes = []
config.test_source_root = os.path.join(config.sage_obj_root, "unittest")
config.test_exec_root = config.test_source_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
