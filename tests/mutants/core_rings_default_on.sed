# libkvx asks for core rings unless told not to
s/if (cenv \&\& strcmp(cenv, "1") == 0)$/if (!(cenv \&\& strcmp(cenv, "0") == 0))/
