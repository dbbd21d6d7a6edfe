"""``fla.ops.common.utils`` (fla < 0.2.1) stand-in."""

from fla.ops.utils.index import prepare_lens, prepare_position_ids, prepare_sequence_ids, prepare_token_indices  # noqa: F401
