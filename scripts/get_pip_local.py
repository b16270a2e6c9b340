"""Local stand-in for ansible-test's pip bootstrap script (get-pip), for machines that reach PyPI
but not the host ansible-test downloads its bootstrap from. Run as a script with pip's options and
the packages to install: it installs the interpreter's bundled pip with ensurepip, then asks that pip
for the requested versions from the package index."""
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"],
                      stdout=subprocess.DEVNULL)
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))
