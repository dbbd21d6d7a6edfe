from fla.ops.utils.cumsum import chunk_local_cumsum, chunk_local_cumsum_scalar, chunk_local_cumsum_vector  # noqa: F401
from fla.ops.utils.index import prepare_lens, prepare_position_ids, prepare_sequence_ids, prepare_token_indices  # noqa: F401
