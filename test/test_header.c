/*
 * test_header.c -- attn.h is self-contained: this file includes nothing
 * else, compiles as strict C and links against the library.
 */
#include <attn.h>

int main(void)
{
    attn_sdpa_desc desc;
    attn_view v = attn_view_bhsd(2, 3, 4);
    attn_view w = attn_view_bshd(2, 3, 4);
    if (attn_sdpa_desc_init(&desc) != ATTN_OK)
        return 1;
    if (v.seq != 4 || w.seq != 8 || desc.reserved[0] != 0)
        return 1;
    if (attn_version() == (const char *)0 || attn_status_str(ATTN_OK) == (const char *)0)
        return 1;
    return (int)(sizeof(attn_sdpa_args) == 0);
}
