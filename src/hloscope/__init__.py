"""hloscope: see what XLA did to your program.

Read HLO text from a file, report, log or dump, and ask what got fused, what
is alive at the memory peak, which collectives sharding inserted and how long
it all takes.  The core needs only the standard library; JAX is imported only
by the front end that compiles functions.
"""

from ._analysis._advisor import RULES as RULES
from ._analysis._advisor import Advice as Advice
from ._analysis._findings import Check as Check
from ._analysis._advisor import Evidence as Evidence
from ._analysis._advisor import Finding as Finding
from ._analysis._advisor import FindingGroup as FindingGroup
from ._analysis._advisor import Saving as Saving
from ._analysis._advisor import advise as advise
from ._analysis._advisor import advise_groups as advise_groups
from ._analysis._devices import DEVICES as DEVICES
from ._analysis._devices import Device as Device
from ._analysis._diff import ModuleDiff as ModuleDiff
from ._analysis._diff import diff_modules as diff_modules
from ._analysis._kernels import CollectiveTraffic as CollectiveTraffic
from ._analysis._kernels import Edge as Edge
from ._analysis._kernels import Kernel as Kernel
from ._analysis._kernels import KernelGraph as KernelGraph
from ._analysis._kernels import kernel_graph as kernel_graph
from ._analysis._memory import BufferInfo as BufferInfo
from ._analysis._memory import MemoryReport as MemoryReport
from ._analysis._memory import ShardedView as ShardedView
from ._analysis._memory import XlaFigures as XlaFigures
from ._analysis._memory import analyze_memory as analyze_memory
from ._analysis._memory import xla_figures as xla_figures
from ._errors import HloModelError as HloModelError
from ._errors import HloParseError as HloParseError
from ._errors import HloscopeError as HloscopeError
from ._errors import HloSourceError as HloSourceError
from ._hlo._attrs import OpMetadata as OpMetadata
from ._hlo._module import Computation as Computation
from ._hlo._module import FileLocation as FileLocation
from ._hlo._module import Instruction as Instruction
from ._hlo._module import Module as Module
from ._hlo._module import SourceLocation as SourceLocation
from ._hlo._module import StackFrameIndex as StackFrameIndex
from ._hlo._replica_groups import parse_replica_groups as parse_replica_groups
from ._hlo._shape import Layout as Layout
from ._hlo._shape import Shape as Shape
from ._hlo._shape import parse_shape as parse_shape
from ._hlo._sharding import Sharding as Sharding
from ._hlo._sharding import parse_sharding as parse_sharding
from ._bench._measure import bench as bench
from ._profile._capture import Profile as Profile
from ._profile._api import profile as profile
from ._profile._load import read_profile as read_profile
from ._profile._times import KernelTime as KernelTime
from ._profile._times import MeasuredTimes as MeasuredTimes
from ._bench._timer import Timer as Timer
from ._bench._timer import time_call as time_call
from ._bench._timer import timer as timer
from ._jax._compare import Comparison as Comparison
from ._jax._compare import Sweep as Sweep
from ._jax._compare import compare as compare
from ._jax._compare import diff as diff
from ._jax._compare import plot_sweeps as plot_sweeps
from ._jax._compare import sweep as sweep
from ._jax._compare import use_cpu_devices as use_cpu_devices
from ._analysis._fit import HbmFit as HbmFit
from ._analysis._hardware import HardwareView as HardwareView
from ._jax._inspect import Report as Report
from ._checked._api import inspect as inspect
from ._jax._inspect import load as load
from ._checked._api import show as show
from ._jax._run import RunResult as RunResult
from ._jax._run import run_module as run_module
from ._render._plot import plot_memory_timeline as plot_memory_timeline
from ._render._svg import Drawing as Drawing
from ._render._svg import draw as draw
from ._bench._files import load_results as load_results
from ._bench._result import BenchResult as BenchResult
from ._sources._memory_inputs import MemoryInputs as MemoryInputs
from ._sources._memory_inputs import read_memory_inputs as read_memory_inputs
from ._sources._reader import HloFile as HloFile
from ._sources._reader import check as check
from ._sources._reader import check_text as check_text
from ._sources._reader import parse as parse
from ._sources._reader import read as read
from ._sources._reader import read_text as read_text
from ._sources._spmd_log import parse_spmd_log as parse_spmd_log
from ._sources._xla_dumps import XlaMemoryFiles as XlaMemoryFiles
from ._sources._xla_dumps import parse_buffer_assignment as parse_buffer_assignment
from ._sources._xla_dumps import parse_live_range as parse_live_range
from ._sources._xla_dumps import parse_memory_usage_report as parse_memory_usage_report
from ._target._catalog import targets as targets

__version__ = "0.1.0"
