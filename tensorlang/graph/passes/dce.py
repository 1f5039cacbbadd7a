"""Placeholder (replaced below)."""


def run(graph) -> list[str]:
    """Nothing yet.

    >>> run(None)
    []
    """
    return []
