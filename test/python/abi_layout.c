/* Prints "struct size N" and "struct.field offset N" for every struct the
 * Python module mirrors with ctypes (python/attn/_lib.py), as this compiler
 * lays out attn.h.  test_abi.py compares the two. */
#include <attn.h>
#include <stddef.h>
#include <stdio.h>

#define S(t) printf(#t " size %zu\n", sizeof(t))
#define F(t, f) printf(#t "." #f " offset %zu\n", offsetof(t, f))

int main(void)
{
    S(attn_view);
    F(attn_view, batch); F(attn_view, head); F(attn_view, seq);

    S(attn_sdpa_desc);
    F(attn_sdpa_desc, batch); F(attn_sdpa_desc, q_heads); F(attn_sdpa_desc, kv_heads);
    F(attn_sdpa_desc, q_len); F(attn_sdpa_desc, kv_len); F(attn_sdpa_desc, qk_dim);
    F(attn_sdpa_desc, v_dim); F(attn_sdpa_desc, q); F(attn_sdpa_desc, k);
    F(attn_sdpa_desc, v); F(attn_sdpa_desc, o); F(attn_sdpa_desc, scale);
    F(attn_sdpa_desc, align); F(attn_sdpa_desc, window_left);
    F(attn_sdpa_desc, window_right); F(attn_sdpa_desc, use_kv_lens);
    F(attn_sdpa_desc, use_q_lens); F(attn_sdpa_desc, mask_mode); F(attn_sdpa_desc, mask);
    F(attn_sdpa_desc, use_bias); F(attn_sdpa_desc, bias); F(attn_sdpa_desc, want_probs);
    F(attn_sdpa_desc, probs); F(attn_sdpa_desc, want_lse); F(attn_sdpa_desc, lse);
    F(attn_sdpa_desc, threads); F(attn_sdpa_desc, dropout_p);
    F(attn_sdpa_desc, dropout_seed); F(attn_sdpa_desc, dropout_offset);
    F(attn_sdpa_desc, use_global_k); F(attn_sdpa_desc, use_global_q);
    F(attn_sdpa_desc, layout_per_head); F(attn_sdpa_desc, reserved_flags);
    F(attn_sdpa_desc, block_size); F(attn_sdpa_desc, k_type); F(attn_sdpa_desc, v_type);
    F(attn_sdpa_desc, kv_block_size); F(attn_sdpa_desc, kv_num_blocks);
    F(attn_sdpa_desc, kv_max_blocks); F(attn_sdpa_desc, engine);
    F(attn_sdpa_desc, use_positions); F(attn_sdpa_desc, q_type); F(attn_sdpa_desc, o_type);
    F(attn_sdpa_desc, q_pos0); F(attn_sdpa_desc, kv_pos0);
    F(attn_sdpa_desc, qk_int8); F(attn_sdpa_desc, reserved_pad2);
    F(attn_sdpa_desc, reserved);

    S(attn_sdpa_args);
    F(attn_sdpa_args, q); F(attn_sdpa_args, k); F(attn_sdpa_args, v); F(attn_sdpa_args, o);
    F(attn_sdpa_args, kv_lens); F(attn_sdpa_args, q_lens); F(attn_sdpa_args, mask);
    F(attn_sdpa_args, bias); F(attn_sdpa_args, probs); F(attn_sdpa_args, lse);
    F(attn_sdpa_args, global_k); F(attn_sdpa_args, global_q); F(attn_sdpa_args, layout);
    F(attn_sdpa_args, k16); F(attn_sdpa_args, v16); F(attn_sdpa_args, block_table);
    F(attn_sdpa_args, q16); F(attn_sdpa_args, o16); F(attn_sdpa_args, kq);
    F(attn_sdpa_args, vq); F(attn_sdpa_args, reserved);

    S(attn_sdpa_bwd_args);
    F(attn_sdpa_bwd_args, q); F(attn_sdpa_bwd_args, k); F(attn_sdpa_bwd_args, v);
    F(attn_sdpa_bwd_args, o); F(attn_sdpa_bwd_args, d_o); F(attn_sdpa_bwd_args, lse);
    F(attn_sdpa_bwd_args, kv_lens); F(attn_sdpa_bwd_args, q_lens); F(attn_sdpa_bwd_args, mask);
    F(attn_sdpa_bwd_args, bias); F(attn_sdpa_bwd_args, dq); F(attn_sdpa_bwd_args, dk);
    F(attn_sdpa_bwd_args, dv); F(attn_sdpa_bwd_args, dbias); F(attn_sdpa_bwd_args, global_k);
    F(attn_sdpa_bwd_args, global_q); F(attn_sdpa_bwd_args, layout);
    F(attn_sdpa_bwd_args, args16); F(attn_sdpa_bwd_args, reserved);

    S(attn_sdpa_bwd_args16);
    F(attn_sdpa_bwd_args16, q); F(attn_sdpa_bwd_args16, k); F(attn_sdpa_bwd_args16, v);
    F(attn_sdpa_bwd_args16, o); F(attn_sdpa_bwd_args16, d_o); F(attn_sdpa_bwd_args16, dq);
    F(attn_sdpa_bwd_args16, dk); F(attn_sdpa_bwd_args16, dv); F(attn_sdpa_bwd_args16, reserved);

    S(attn_mha_desc);
    F(attn_mha_desc, embed_dim); F(attn_mha_desc, num_heads); F(attn_mha_desc, num_kv_heads);
    F(attn_mha_desc, kdim); F(attn_mha_desc, vdim); F(attn_mha_desc, batch);
    F(attn_mha_desc, q_len); F(attn_mha_desc, kv_len); F(attn_mha_desc, self_attention);
    F(attn_mha_desc, packed_in_proj); F(attn_mha_desc, has_bias); F(attn_mha_desc, x_stride);
    F(attn_mha_desc, key_stride); F(attn_mha_desc, value_stride);
    F(attn_mha_desc, out_stride); F(attn_mha_desc, scale); F(attn_mha_desc, align);
    F(attn_mha_desc, window_left); F(attn_mha_desc, window_right);
    F(attn_mha_desc, use_kv_lens); F(attn_mha_desc, use_q_lens); F(attn_mha_desc, mask_mode);
    F(attn_mha_desc, mask); F(attn_mha_desc, use_bias); F(attn_mha_desc, bias);
    F(attn_mha_desc, key_padding_mode); F(attn_mha_desc, weights); F(attn_mha_desc, threads);
    F(attn_mha_desc, dropout_p); F(attn_mha_desc, dropout_seed);
    F(attn_mha_desc, dropout_offset); F(attn_mha_desc, use_global_k);
    F(attn_mha_desc, use_global_q); F(attn_mha_desc, layout_per_head);
    F(attn_mha_desc, reserved_flags); F(attn_mha_desc, block_size);
    F(attn_mha_desc, engine); F(attn_mha_desc, reserved_pad); F(attn_mha_desc, x_type);
    F(attn_mha_desc, w_type); F(attn_mha_desc, reserved);

    S(attn_mha_weights);
    F(attn_mha_weights, in_proj_weight); F(attn_mha_weights, in_proj_bias);
    F(attn_mha_weights, q_weight); F(attn_mha_weights, k_weight);
    F(attn_mha_weights, v_weight); F(attn_mha_weights, q_bias); F(attn_mha_weights, k_bias);
    F(attn_mha_weights, v_bias); F(attn_mha_weights, out_weight);
    F(attn_mha_weights, out_bias); F(attn_mha_weights, weights16);
    F(attn_mha_weights, reserved);

    S(attn_mha_weights16);
    F(attn_mha_weights16, in_proj_weight); F(attn_mha_weights16, in_proj_bias);
    F(attn_mha_weights16, q_weight); F(attn_mha_weights16, k_weight);
    F(attn_mha_weights16, v_weight); F(attn_mha_weights16, q_bias);
    F(attn_mha_weights16, k_bias); F(attn_mha_weights16, v_bias);
    F(attn_mha_weights16, out_weight); F(attn_mha_weights16, out_bias);
    F(attn_mha_weights16, reserved);

    S(attn_sdpa_bwd_desc);
    F(attn_sdpa_bwd_desc, fwd); F(attn_sdpa_bwd_desc, d_o); F(attn_sdpa_bwd_desc, dq);
    F(attn_sdpa_bwd_desc, dk); F(attn_sdpa_bwd_desc, dv); F(attn_sdpa_bwd_desc, want_dbias);
    F(attn_sdpa_bwd_desc, dbias); F(attn_sdpa_bwd_desc, reserved);
    S(attn_mha_grads);
    F(attn_mha_grads, dx); F(attn_mha_grads, dkey); F(attn_mha_grads, dvalue);
    F(attn_mha_grads, d_in_proj_weight); F(attn_mha_grads, d_in_proj_bias);
    F(attn_mha_grads, d_q_weight); F(attn_mha_grads, d_k_weight); F(attn_mha_grads, d_v_weight);
    F(attn_mha_grads, d_q_bias); F(attn_mha_grads, d_k_bias); F(attn_mha_grads, d_v_bias);
    F(attn_mha_grads, d_out_weight); F(attn_mha_grads, d_out_bias); F(attn_mha_grads, grads16);
    F(attn_mha_grads, reserved);
    S(attn_mha_grads16);
    F(attn_mha_grads16, dy); F(attn_mha_grads16, dx); F(attn_mha_grads16, dkey);
    F(attn_mha_grads16, dvalue); F(attn_mha_grads16, d_in_proj_weight);
    F(attn_mha_grads16, d_in_proj_bias); F(attn_mha_grads16, d_q_weight);
    F(attn_mha_grads16, d_k_weight); F(attn_mha_grads16, d_v_weight);
    F(attn_mha_grads16, d_q_bias); F(attn_mha_grads16, d_k_bias); F(attn_mha_grads16, d_v_bias);
    F(attn_mha_grads16, d_out_weight); F(attn_mha_grads16, d_out_bias);
    F(attn_mha_grads16, reserved);
    S(attn_mha_args16);
    F(attn_mha_args16, x); F(attn_mha_args16, key); F(attn_mha_args16, value);
    F(attn_mha_args16, out); F(attn_mha_args16, reserved);

    S(attn_mha_args);
    F(attn_mha_args, x); F(attn_mha_args, key); F(attn_mha_args, value);
    F(attn_mha_args, out); F(attn_mha_args, kv_lens); F(attn_mha_args, q_lens);
    F(attn_mha_args, mask); F(attn_mha_args, bias); F(attn_mha_args, key_padding_mask);
    F(attn_mha_args, weights); F(attn_mha_args, global_k); F(attn_mha_args, global_q);
    F(attn_mha_args, layout); F(attn_mha_args, args16); F(attn_mha_args, reserved);

    S(attn_linear_desc);
    F(attn_linear_desc, batch); F(attn_linear_desc, q_heads); F(attn_linear_desc, kv_heads);
    F(attn_linear_desc, q_len); F(attn_linear_desc, kv_len); F(attn_linear_desc, qk_dim);
    F(attn_linear_desc, v_dim); F(attn_linear_desc, q); F(attn_linear_desc, k);
    F(attn_linear_desc, v); F(attn_linear_desc, o); F(attn_linear_desc, feature_map);
    F(attn_linear_desc, causal); F(attn_linear_desc, align); F(attn_linear_desc, eps);
    F(attn_linear_desc, use_kv_lens); F(attn_linear_desc, use_q_lens);
    F(attn_linear_desc, use_state); F(attn_linear_desc, threads); F(attn_linear_desc, engine);
    F(attn_linear_desc, reserved_pad); F(attn_linear_desc, q_type);
    F(attn_linear_desc, k_type); F(attn_linear_desc, v_type); F(attn_linear_desc, o_type);
    F(attn_linear_desc, reserved);

    S(attn_linear_args16);
    F(attn_linear_args16, q); F(attn_linear_args16, k); F(attn_linear_args16, v);
    F(attn_linear_args16, o); F(attn_linear_args16, reserved);

    S(attn_linear_args);
    F(attn_linear_args, q); F(attn_linear_args, k); F(attn_linear_args, v);
    F(attn_linear_args, o); F(attn_linear_args, kv_lens); F(attn_linear_args, q_lens);
    F(attn_linear_args, state_s); F(attn_linear_args, state_z); F(attn_linear_args, args16);
    F(attn_linear_args, reserved);

    S(attn_linear_bwd_desc);
    F(attn_linear_bwd_desc, fwd); F(attn_linear_bwd_desc, d_o); F(attn_linear_bwd_desc, dq);
    F(attn_linear_bwd_desc, dk); F(attn_linear_bwd_desc, dv);
    F(attn_linear_bwd_desc, reserved);

    S(attn_linear_bwd_args16);
    F(attn_linear_bwd_args16, q); F(attn_linear_bwd_args16, k); F(attn_linear_bwd_args16, v);
    F(attn_linear_bwd_args16, d_o); F(attn_linear_bwd_args16, dq);
    F(attn_linear_bwd_args16, dk); F(attn_linear_bwd_args16, dv);
    F(attn_linear_bwd_args16, reserved);

    S(attn_linear_bwd_args);
    F(attn_linear_bwd_args, q); F(attn_linear_bwd_args, k); F(attn_linear_bwd_args, v);
    F(attn_linear_bwd_args, d_o); F(attn_linear_bwd_args, dq); F(attn_linear_bwd_args, dk);
    F(attn_linear_bwd_args, dv); F(attn_linear_bwd_args, kv_lens);
    F(attn_linear_bwd_args, q_lens); F(attn_linear_bwd_args, args16);
    F(attn_linear_bwd_args, reserved);

    S(attn_kv_append_args);
    F(attn_kv_append_args, k_cache); F(attn_kv_append_args, v_cache);
    F(attn_kv_append_args, block_table); F(attn_kv_append_args, kv_lens);
    F(attn_kv_append_args, new_lens); F(attn_kv_append_args, t);
    F(attn_kv_append_args, k_new); F(attn_kv_append_args, v_new);
    F(attn_kv_append_args, k_new_view); F(attn_kv_append_args, v_new_view);
    F(attn_kv_append_args, reserved);

    S(attn_partials_merge_args);
    F(attn_partials_merge_args, parts); F(attn_partials_merge_args, rows);
    F(attn_partials_merge_args, dim); F(attn_partials_merge_args, o_parts);
    F(attn_partials_merge_args, o_part_stride); F(attn_partials_merge_args, o_row_stride);
    F(attn_partials_merge_args, lse_parts); F(attn_partials_merge_args, lse_part_stride);
    F(attn_partials_merge_args, lse_row_stride); F(attn_partials_merge_args, o);
    F(attn_partials_merge_args, o_out_stride); F(attn_partials_merge_args, lse_out);
    F(attn_partials_merge_args, lse_out_stride); F(attn_partials_merge_args, reserved);

    /* enums mirrored as c_int */
    printf("attn_status size %zu\n", sizeof(attn_status));
    printf("attn_align size %zu\n", sizeof(attn_align));
    printf("attn_mask_mode size %zu\n", sizeof(attn_mask_mode));
    printf("attn_weights_mode size %zu\n", sizeof(attn_weights_mode));
    printf("attn_dtype size %zu\n", sizeof(attn_dtype));
    printf("attn_feature_map size %zu\n", sizeof(attn_feature_map));
    printf("attn_engine size %zu\n", sizeof(attn_engine));
    return 0;
}
