"""Neural-network layers as pytrees (``pb.nn``), in the style of Equinox: a module is a
dataclass whose array fields are its parameters and whose configuration fields are
``pb.field(static=True)``; its ``__call__`` is plain NumPy that pullback stages like user
code, so one ``pb.jit`` compiles a model's forward pass, its gradient and the optimiser
update together.  Layers are built from random keys by ``Layer.init(key, ...)``."""

from .attention import MultiheadAttention as MultiheadAttention
from .losses import binary_cross_entropy_with_logits as binary_cross_entropy_with_logits
from .losses import mse as mse
from .losses import nll_loss as nll_loss
from .losses import softmax_cross_entropy as softmax_cross_entropy
from .losses import (
    softmax_cross_entropy_with_integer_labels as softmax_cross_entropy_with_integer_labels,
)
from .recurrent import GRU as GRU
from .recurrent import LSTM as LSTM
from .recurrent import RNN as RNN
from .recurrent import GRUCell as GRUCell
from .recurrent import LSTMCell as LSTMCell
from .recurrent import RNNCell as RNNCell
