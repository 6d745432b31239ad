-- Seed rows: the default tenant (id 1) and Keycast's global policies (docs/protocol-keycast.md,
-- Policies and permissions).
INSERT INTO tenants (id, domain, name) VALUES (1, 'default', 'Default Tenant') ON CONFLICT DO NOTHING;

INSERT INTO permissions (id, identifier, config) VALUES
    (1,  'allowed_kinds_social',           '{"allowed_kinds": [0, 1, 3, 7, 9735]}'),
    (2,  'allowed_kinds_messaging',        '{"allowed_kinds": [4, 44, 1059]}'),
    (3,  'allowed_kinds_zaps',             '{"allowed_kinds": [9734]}'),
    (4,  'allowed_kinds_lists',            '{"allowed_kinds": [10000, 10001, 10002, 10003, 10004, 10005, 10006, 10007, 10015, 10030]}'),
    (5,  'allowed_kinds_longform',         '{"allowed_kinds": [30023, 30024, 30030, 30040, 30041, 30078, 30311, 30315, 30402, 30403]}'),
    (6,  'allowed_kinds_wallet',           '{"allowed_kinds": [23194, 23195]}'),
    (7,  'allowed_kinds_deletion',         '{"allowed_kinds": [5]}'),
    (8,  'allowed_kinds_reports',          '{"allowed_kinds": [1984]}'),
    (9,  'allowed_kinds_social_messaging', '{"allowed_kinds": [0, 1, 3, 4, 7, 44, 1059, 9735, 22242]}'),
    (10, 'decrypt_only',                   '{}'),
    (11, 'full_access',                    '{}')
ON CONFLICT DO NOTHING;

INSERT INTO policies (id, name, team_id, slug, display_name, description) VALUES
    (1, 'Standard Social (Default)', NULL, 'social',   'Social App',   'Post notes, reactions, and private messages'),
    (2, 'Read Only',                 NULL, 'readonly', 'Read Only',    'Can only read encrypted messages and authenticate with relays. Cannot post, react, or send messages.'),
    (3, 'Wallet Only',               NULL, 'wallet',   'Wallet Only',  'Wallet and payment operations only'),
    (4, 'Full Access',               NULL, 'full',     'Full Access',  'Sign, encrypt, and decrypt anything without restrictions')
ON CONFLICT DO NOTHING;

INSERT INTO policy_permissions (id, policy_id, permission_id) VALUES
    (1, 1, 9),
    (2, 2, 10),
    (3, 3, 3),
    (4, 4, 11)
ON CONFLICT DO NOTHING;
