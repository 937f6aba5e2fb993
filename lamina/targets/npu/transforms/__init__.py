"""The NPU's passes after the conversion from ``tpu``: layer grouping (:mod:`.layer_group`), the
groups' local planning — slices, schedule, LMEM — (:mod:`.local`) and DDR addresses (:mod:`.address`)."""
