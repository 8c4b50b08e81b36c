"""Side requests: the request-level controller for the methods that need probe answers.

A method whose `Method.online` is ``"side"`` (Dynasor-CoT, DEER, answer consistency, plug-ins;
budget forcing as a cap) is run by driving generation through an engine's `Stream`, with
prefix-cached side requests at its decision points:

* `_controller` -- `SideController` / `run_side`, the state machine per trajectory;
* `_rule` -- `FieldRule`, the method's own ``stop`` and its probe schedule;
* `_probes` -- which probes are issued per position, and how the field methods' own are read;
* `_job` -- the job and result records (one trajectory in, what happened online out).
"""
