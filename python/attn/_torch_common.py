"""What attn's torch layers share (attn.torch, its linear attention and
decoding, and the numpy functions given a tensor): checks of tensor
arguments and tensors as numpy views of the same memory, and back."""

import numpy as np
import torch

# The tensor types attn computes (bfloat16 travels as uint16 bit patterns).
TYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_tensor(t, name):
    """TypeError / ValueError unless t is a CPU tensor of a type in TYPES."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if t.device.type != "cpu":
        raise ValueError("%s is on %s: attn runs on the CPU" % (name, t.device))
    if t.dtype not in TYPES:
        raise TypeError("%s: attn computes float32, bfloat16 or float16 tensors, not %s "
                        "(convert with .float())" % (name, t.dtype))


def to_numpy(t):
    """A numpy view of a CPU tensor's memory, detached (bfloat16 as its
    uint16 bit patterns); no copy."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def from_numpy(a, bf16):
    """A tensor over a's memory; bf16: a holds bfloat16 bit patterns."""
    if bf16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def ints(x):
    """An integer argument (lengths): a tensor as numpy, anything else as
    it is (the numpy layer converts and checks it)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return x
