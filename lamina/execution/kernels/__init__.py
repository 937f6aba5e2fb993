"""Optimised executors (floor 2: numpy only, no dialect imports) and the one conv/pool geometry.

Each op's ``execute`` in its dialect is the contract: a short numpy statement of its semantics.
The kernels here are the fast forms the interpreter runs (via the op's ``executor()``), tested
against the contracts with hypothesis in ``tests/execution/kernels``:

* :mod:`.geometry`: window geometry (pads incl. auto_pad, output sizes incl. ceil_mode);
* :mod:`.windows`: sliding windows as strided views, window sums in a fixed order;
* :mod:`.reduce`: sums and means in an order fixed by the reduced axes alone (slices sum as the whole);
* :mod:`.conv`: convolution (im2col into reused buffers, 1x1 GEMM, depthwise phase planes);
* :mod:`.pool`: max pooling by a running maximum over the taps;
* :mod:`.norm`: float32 LayerNorm and in-place Softmax.
"""
