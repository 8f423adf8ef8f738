"""The build hook: a wheel always ships oma_portable.wasm.

If src/oma_component/oma_portable.wasm is missing when the package is built (pip wheel,
python -m build, pip install .), it is built with cargo first (see build_component.py).
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithComponent(build_py):
    def run(self):
        wasm = os.path.join(HERE, "src", "oma_component", "oma_portable.wasm")
        if not os.path.exists(wasm):
            sys.path.insert(0, HERE)
            import build_component

            build_component.build(os.environ.get("OMA_WASM_PROFILE", "wasm-release"))
        super().run()


setup(cmdclass={"build_py": BuildPyWithComponent})
