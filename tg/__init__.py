"""tg: a deep-learning stack that owns every layer down to the GPU."""
from ir.switches import Context, getenv
from ir.dtype import dtypes
from drivers.device import Device, GlobalCounters
