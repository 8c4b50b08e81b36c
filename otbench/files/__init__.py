"""Files otbench writes and reads, whatever stage writes them (no JAX, no NumPy).

The shared helpers every stage uses: the atomic writers and the rules that
keep outputs off inputs and off what otbench did not write, the one guarded
JSON reader, the one CSV encoder, the provenance block and the file
checksum. The probe, the analysis, the report and the CLI import them from
here; `otbench.analysis.measurement` keeps to the measurement contract.
"""

from ._atomic import (
    RECORDED,
    atomic_dir,
    atomic_path,
    check_output_dir,
    write_bytes_atomic,
    write_text_atomic,
)
from ._csv import csv_field, csv_records, csv_text
from ._hash import sha256_file, sha256_stream
from ._json import loads_json, read_json, read_json_bytes
from ._json_text import dumps_indented
from ._ledger import LEDGER, written_by_otbench
from ._provenance import git_commit, provenance
from ._read import arrow_file, bounded_lines, open_regular, read_regular, read_regular_text
from ._rules import (
    check_output,
    foreign_entries,
    is_measurement_set,
    output_rules,
    refuse_input,
    refuse_same_output,
)
from ._temporaries import clean_stale, drop_temporary, new_temporary, pid_alive

__all__ = [
    "LEDGER", "RECORDED", "arrow_file", "atomic_dir", "atomic_path", "bounded_lines", "check_output",
    "check_output_dir", "clean_stale", "csv_field", "csv_records", "csv_text", "drop_temporary",
    "dumps_indented", "foreign_entries", "git_commit", "is_measurement_set", "loads_json",
    "new_temporary", "open_regular", "output_rules", "pid_alive", "provenance", "read_json",
    "read_json_bytes", "read_regular", "read_regular_text", "refuse_input", "refuse_same_output",
    "sha256_file", "sha256_stream", "write_bytes_atomic", "write_text_atomic", "written_by_otbench",
]
