import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the suites run on the CPU unless DEV names a device: an OpenCL runtime installed for the CL runs (PoCL) would
# otherwise become the default device, which Device.DEFAULT probes before CPU
os.environ.setdefault("DEV", "CPU")
