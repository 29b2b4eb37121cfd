/* model_load: a model's weights and inputs from files (--load, --input, --target).
 *
 * The model never knows about files (design.md); this module sits between:
 * it reads checkpoints with safetensors.h and arrays with npy.h and hands the
 * model tensors in PyTorch's layout, with messages that name the file.
 */
#ifndef TSCOPE_MODEL_LOAD_H
#define TSCOPE_MODEL_LOAD_H

#include "tscope/model.h"
#include "tscope/npy.h"
#include "tscope/status.h"

/* Copy every tensor of a safetensors file into the model's parameters, by
 * PyTorch state_dict name (nn.Transformer's, nn.TransformerEncoder's or a lone
 * nn.MultiheadAttention's; see ts_model_find_param). `prefix`, when not NULL,
 * goes before each name in the file, as when loading a submodule's state_dict
 * ("decoder.layers.0." for an nn.TransformerDecoderLayer). As PyTorch's strict
 * load_state_dict: every parameter must come from the file and every tensor
 * of the file must be a parameter. A missing tensor lists what the file has;
 * a wrong shape names the tensor, the file and both shapes. */
ts_status ts_model_load_safetensors(ts_model *m, const char *path, const char *prefix);

/* Read --input X.npy (B, S, W) and, when target_path is not NULL, --target
 * Y.npy (B, T, D) as already-embedded vectors, and make cfg fit them: batch,
 * seq and tgt_seq come from the files, input becomes TS_INPUT_EMBEDDED. W must
 * be cfg's in_dim (or d_model when in_dim is 0); a target needs an
 * encoder-decoder. x and y (y may be NULL without a target) are freed with
 * ts_npy_free. */
ts_status ts_model_read_embedded(ts_model_config *cfg, const char *input_path, const char *target_path,
                                 ts_npy *x, ts_npy *y);

#endif
