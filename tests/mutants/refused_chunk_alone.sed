# a refused chunk is refused alone (an event to its engine): its room goes on, or is never made,
# and the room's other chunks can make it a SUCCESS without that chunk's pages
/^chunk_refuse_room(/,/^}/ s/^\td->ctr.chunks_refused++;$/\td->ctr.chunks_refused++;\n\tchunk_refuse(d, e, room, error, why);\n\treturn;/
