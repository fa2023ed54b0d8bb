# the room a decode open replaces counts against its user's cap as one more: an engine at its user's cap cannot open an ended id again
s/^\tif (e \&\& rooms_of_uid(d, e->uid) - (old \&\& old->engine_id == engine_id) >=$/\tif (e \&\& rooms_of_uid(d, e->uid) >=/
