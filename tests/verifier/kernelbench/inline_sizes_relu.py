import torch
import torch.nn as nn


class Model(nn.Module):
    """
    ReLU at a size written into get_inputs() itself: no constant to shrink.
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(4096, 393216)]


def get_init_inputs():
    return []
