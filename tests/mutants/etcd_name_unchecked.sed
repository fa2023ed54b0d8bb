# members.c: a registry entry's node name is taken as it is
/^name_ok(const char \*s)/,/^}/s/	if (n == 0 || n >= KVX_CFG_NAME_MAX)/	return true;\n	if (n == 0)/
