// test_header_cpp.cpp -- attn.h compiles as C++ on its own and its
// functions link with C linkage.
#include <attn.h>

static_assert(ATTN_VERSION == ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 +
                                  ATTN_VERSION_PATCH,
              "version macros");

int main()
{
    attn_sdpa_desc desc;
    if (attn_sdpa_desc_init(&desc) != ATTN_OK)
        return 1;
    desc.q = desc.o = attn_view_bshd(2, 3, 4);
    desc.k = desc.v = attn_view_bhsd(2, 3, 4);
    attn_sdpa_plan *plan = nullptr;
    // valid strides but all sizes 0: refused
    if (attn_sdpa_plan_create(&plan, &desc) != ATTN_ERR_BAD_SIZE || plan != nullptr)
        return 1;
    return attn_sdpa_plan_destroy(nullptr) == ATTN_OK ? 0 : 1;
}
