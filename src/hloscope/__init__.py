"""hloscope: see what XLA did to your program.

Read HLO text from a file, report, log or dump, and ask what got fused, what
is alive at the memory peak, which collectives sharding inserted and how long
it all takes.  The core needs only the standard library; JAX is imported only
by the front end that compiles functions.
"""

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
from ._hlo._shape import Layout as Layout
from ._hlo._shape import Shape as Shape
from ._hlo._shape import parse_shape as parse_shape
from ._hlo._sharding import Sharding as Sharding
from ._hlo._sharding import parse_sharding as parse_sharding
from ._sources._reader import HloFile as HloFile
from ._sources._reader import parse as parse
from ._sources._reader import read as read
from ._sources._reader import read_text as read_text

__version__ = "0.1.0"
