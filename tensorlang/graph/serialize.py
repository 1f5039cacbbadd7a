"""Saving and loading models (filled in below)."""


def load_model(path):
    """Not yet.

    Example::

        load_model("net.tlm")
    """
    raise NotImplementedError
