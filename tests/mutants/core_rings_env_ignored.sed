# libkvx asks for core rings whatever KVX_CORE_RINGS says
s/if (!cenv || strcmp(cenv, "0") != 0)$/if (!cenv || cenv)/
