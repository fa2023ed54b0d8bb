# libkvx asks for core rings only with KVX_CORE_RINGS=1 (the old opt-in)
s/if (!cenv || strcmp(cenv, "0") != 0)$/if (cenv \&\& strcmp(cenv, "1") == 0)/
