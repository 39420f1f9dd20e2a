"""Where ipydevice meets its hosts: IPython (``%load_ext``), ``sys.excepthook``,
warnings and logging, pytest (``-p ipydevice``) and ``python -m ipydevice run``."""
