# members.c: a registry entry's node name is taken as it is
s/	if (!kvx_config_name_ok(name)) {/	if (0) {/
