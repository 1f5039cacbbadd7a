"""Front ends that bring models from frameworks into the graph compiler.

`tensorlang.frontend.torch_import` (PyTorch: torch.export, .pt2 files, the torch.compile backend) is the only
module of tensorlang that imports torch; importing this package does not.
"""
