"""The user's code as text, the room every stage stands on.

``statements`` parses a cell or file once per text and reads its statements,
``cells`` says where code comes from (``In [3], line 5``) and indexes a cell's
assignments, ``rawcell`` gives a cell back as typed (magic lines kept),
``rewrite`` edits code text by span, ``treefacts`` reads what fix planning needs
of a parsed tree once per tree. No frame, no object, no stage is read here.
"""
