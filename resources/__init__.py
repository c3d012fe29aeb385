"""The app's data, installed as ``memlens.resources``: icons (``icons/*.svg``) and the style sheet (``style.qss``).

Read it through :func:`importlib.resources.files`, never through a path next to the source: in a wheel the source
tree is not there.
"""
