"""Neural-network layers as pytrees (``pb.nn``), in the style of Equinox: a module is a
dataclass whose array fields are its parameters and whose configuration fields are
``pb.field(static=True)``; its ``__call__`` is plain NumPy that pullback stages like user
code, so one ``pb.jit`` compiles a model's forward pass, its gradient and the optimiser
update together.  Layers are built from random keys by ``Layer.init(key, ...)``."""

from . import functional as functional
from . import init as init
from .activations import elu as elu
from .activations import gelu as gelu
from .activations import leaky_relu as leaky_relu
from .activations import log_softmax as log_softmax
from .activations import logsumexp as logsumexp
from .activations import relu as relu
from .activations import sigmoid as sigmoid
from .activations import silu as silu
from .activations import softmax as softmax
from .activations import softplus as softplus
from .activations import tanh as tanh
from .attention import MultiheadAttention as MultiheadAttention
from .conv import AvgPool2d as AvgPool2d
from .conv import Conv1d as Conv1d
from .conv import Conv2d as Conv2d
from .conv import MaxPool2d as MaxPool2d
from .dropout import Dropout as Dropout
from .linear import Embedding as Embedding
from .linear import Lambda as Lambda
from .linear import Linear as Linear
from .linear import Sequential as Sequential
from .losses import binary_cross_entropy_with_logits as binary_cross_entropy_with_logits
from .losses import mse as mse
from .losses import nll_loss as nll_loss
from .losses import softmax_cross_entropy as softmax_cross_entropy
from .losses import (
    softmax_cross_entropy_with_integer_labels as softmax_cross_entropy_with_integer_labels,
)
from .norm import BatchNorm as BatchNorm
from .norm import BatchNormState as BatchNormState
from .norm import LayerNorm as LayerNorm
from .recurrent import GRU as GRU
from .recurrent import LSTM as LSTM
from .recurrent import RNN as RNN
from .recurrent import GRUCell as GRUCell
from .recurrent import LSTMCell as LSTMCell
from .recurrent import RNNCell as RNNCell
