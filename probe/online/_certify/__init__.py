"""Certification: stored trajectories replayed online and compared with OTBench's offline stops.

* `_stored` -- what a stored measurement set gives its replay (trajectories, family, engine,
  grader);
* `_replay` -- the replay through the logits processor, its comparison and the certificate of a
  processor method;
* `_interval` -- the two-stage paired bootstrap of the point at θ, restated in NumPy;
* `_verdict` -- the verdict and every source of disagreement;
* `_side` -- the certificate of a field method run by the side-request controller;
* `_cap` -- the certificate of the engine's own thinking cap.
"""
