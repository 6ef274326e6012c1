#include "support/family_config.h"

namespace tfm::test {

ModelConfig small_family_config(const Family& f, std::int64_t heads, std::int64_t kv_heads, std::int64_t decoder_layers) {
  ModelConfig c = f.schema.base;
  c.vocab_size = 64;
  c.d_model = 8 * heads;
  c.n_heads = heads;
  c.n_kv_heads = c.n_kv_heads > 0 ? kv_heads : 0;
  c.head_dim = c.head_dim > 0 ? 8 : 0;
  c.n_layers = 2;
  c.n_decoder_layers = c.n_decoder_layers > 0 ? decoder_layers : 0;
  c.d_ff = 2 * c.d_model;
  c.max_positions = 32;
  c.num_labels = 3;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  if (c.reads_images()) c.image_size = 8, c.patch_size = 4, c.max_positions = c.image_tokens();
  if (c.reads_audio()) c.num_mel_bins = 8, c.max_source_positions = 20;
  c.pad_token_id = c.pad_token_id >= 0 ? 1 : -1;
  c.bos_token_id = c.eos_token_id = c.decoder_start_token_id = 2;
  if (c.init_std == 0.0) c.init_std = 0.02;
  if (c.text_tower.enabled()) {  // CLIP's text tower, as small
    TextTowerConfig& t = c.text_tower;
    t.vocab_size = 64, t.d_model = 4 * heads, t.n_heads = heads, t.n_layers = 2, t.d_ff = 8 * heads;
    t.max_positions = 16, t.projection_dim = 8, t.pad_token_id = 1, t.bos_token_id = 3, t.eos_token_id = 2;
  }
  return c;
}

}  // namespace tfm::test
