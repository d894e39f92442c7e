# cffi_modules cannot be expressed in pyproject.toml (python-cffi/cffi#55).
from setuptools import setup

setup(cffi_modules=["shournal/_fanotify_build.py:ffibuilder"])
