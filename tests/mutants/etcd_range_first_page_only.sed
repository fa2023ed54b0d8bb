# the full read stops after its first page: nodes listed after it are never found
s/^\tif (n \&\& json_object_object_get_ex(o, "more", \&more) \&\&$/\tif (0 \&\& json_object_object_get_ex(o, "more", \&more) \&\&/
