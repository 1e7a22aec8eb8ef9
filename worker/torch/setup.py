"""Installs the nereus package (nereus.capi, nereus.torch) with a built libnereus_c.so and nereus_server copied
in beside it (from $NEREUS_BUILD_DIR, default the checkout's build/), so the installed package needs no
environment variable: `pip install worker/torch` after scripts/build.sh --target=nereus_c,nereus_server.
Without a build the package installs alone and finds the library through NEREUS_LIBRARY at run time."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        build = os.environ.get("NEREUS_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
        for sub, name in (("lib", "libnereus_c.so"), ("bin", "nereus_server")):
            src = os.path.join(build, sub, name)
            if not os.path.isfile(src):
                print("nereus: %s not found; the installed package will need NEREUS_LIBRARY / NEREUS_BIN_DIR" % src)
                continue
            dst_dir = os.path.join(self.build_lib, "nereus", sub)
            os.makedirs(dst_dir, exist_ok=True)
            shutil.copy2(src, os.path.join(dst_dir, name))
            print("nereus: bundled %s" % src)


setup(cmdclass={"build_py": BuildWithLibrary})
